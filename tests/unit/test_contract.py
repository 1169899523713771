"""The contract's numbers are decided once (workflowjobs/contract.py) and quoted alike.

Two holds: the protos and docs quote the bounds the code enforces, and no
module of the coordinator, the SDK, the CLI, the dashboard or the ingress
spells a bound again as a literal of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from coordinator.model import FINISHED_STATUSES, LIVE_STATUSES, JobStatus
from worker_sdk import JobStatus as SdkJobStatus
from workflowjobs import contract

ROOT = Path(__file__).resolve().parents[2]
QUOTING = sorted(
    [*ROOT.glob("protos/workflowjobs/v1/*.proto"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]
)
SOURCES = sorted(
    p
    for package in ("coordinator", "worker_sdk", "wfjobs_dashboard")
    for p in (ROOT / package).rglob("*.py")
    if "migrations" not in p.parts
)


def _quotes(pattern: str) -> list[tuple[str, str, int]]:
    """(where, the line with what it is about, the number) of each match in the protos and docs.

    A proto comment is about the field on the line after it, so that line is read with it.
    """
    found = []
    for path in QUOTING:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            around = " ".join(lines[i : i + 2]) if path.suffix == ".proto" else line
            for m in re.finditer(pattern, line):
                number = int(m.group(1).replace(",", ""))
                found.append((f"{path.relative_to(ROOT)}:{i + 1}", around, number))
    return found


def test_every_quoted_longest_span_or_backoff_is_the_contracts() -> None:
    quotes = _quotes(r"\b(36\d) days")
    assert quotes, "the protos and docs quote the longest span"
    wrong = [
        where
        for where, around, days in quotes
        if days
        != (contract.LONGEST_BACKOFF_DAYS if "backoff" in around else contract.LONGEST_SPAN_DAYS)
    ]
    assert wrong == []


def test_quoted_string_traceback_and_text_limits_are_the_contracts() -> None:
    # Besides the two limits, the docs quote the ingress's hashed-key length (its own
    # choice, below the string limit) and how much of a bad value error messages quote
    # (40 to 80 characters); "N characters long" is an example of a refusal's message.
    others = {40, 80, 200}
    strings = {n for _, _, n in _quotes(r"\b(\d[\d,]*) characters(?! long)")} - others
    assert strings == {contract.MAX_STRING_LENGTH, contract.MAX_TEXT_LENGTH}
    tracebacks = {n for _, around, n in _quotes(r"\b(\d+) KiB") if "traceback" in around.lower()}
    assert tracebacks == {contract.MAX_TRACEBACK_BYTES // 1024}


@pytest.mark.parametrize(
    "literal",
    [
        r"(?<!10 \* )\b36[56] \*",  # a span or backoff in days, spelled again
        r"2 ?\*\* ?31 ?- ?1|-\(2 ?\*\* ?31\)",  # int32's range
        r"253402300799",  # the last second of the year 9999
        r"16 \* 1024\b",  # the traceback limit
    ],
)
def test_no_module_spells_a_contract_bound_again(literal: str) -> None:
    again = [
        f"{p.relative_to(ROOT)}:{n}"
        for p in SOURCES
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(literal, line) and not line.lstrip().startswith("#")
    ]
    assert again == []


def test_status_sets_are_the_contracts_on_every_side() -> None:
    assert [int(s) for s in LIVE_STATUSES] == list(contract.LIVE_STATUSES)
    assert [int(s) for s in FINISHED_STATUSES] == list(contract.FINAL_STATUSES)
    assert set(LIVE_STATUSES) | set(FINISHED_STATUSES) == set(JobStatus)
    terminal = {s.to_proto() for s in SdkJobStatus if s.is_terminal}
    assert terminal == set(contract.FINAL_STATUSES)


def test_latest_time_is_the_last_second_of_the_latest_year() -> None:
    assert contract.LATEST_TIME.year == contract.LATEST_YEAR
    assert contract.LATEST_TIME_US == 253402300799 * 1_000_000
    assert contract.INT32_MAX == 2**31 - 1 and contract.INT32_MIN == -(2**31)
