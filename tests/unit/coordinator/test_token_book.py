"""The token file's reloads: listeners hear changes; a half-written file is not loaded."""

from __future__ import annotations

import json
from pathlib import Path

from coordinator.api.auth import TokenBook, hash_token


def _line(token: str, tenants: list[str]) -> str:
    return json.dumps(
        {"name": token, "sha256": hash_token(token), "roles": ["worker"], "tenants": tenants}
    )


def test_reload_notifies_and_reports_removed_credentials(tmp_path: Path) -> None:
    path = tmp_path / "tokens.jsonl"
    path.write_text(_line("one", ["a"]) + "\n" + _line("two", ["b"]) + "\n")
    book = TokenBook(path, recheck_s=0)
    key = hash_token("two")
    assert book.principal(key) is not None and book.principal(key).tenants == {"b"}
    heard: list[int] = []
    book.subscribe(lambda: heard.append(len(book)))
    path.write_text(_line("one", ["a"]) + "\n")
    book.maybe_reload()
    assert heard == [1] and book.principal(key) is None
    book.maybe_reload()  # unchanged file: no second notice
    assert heard == [1]


def test_an_empty_file_is_taken_as_being_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "tokens.jsonl"
    path.write_text(_line("one", ["a"]) + "\n")
    book = TokenBook(path, recheck_s=0)
    heard: list[int] = []
    book.subscribe(lambda: heard.append(len(book)))
    path.write_text("")
    book.maybe_reload()
    assert heard == [] and book.authenticate("one") is not None
    path.write_text("# every credential removed\n")
    book.maybe_reload()
    assert heard == [0] and book.authenticate("one") is None
