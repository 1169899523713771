"""The bench's coordinator profile summary: py-spy's collapsed stacks grouped by layer."""

from __future__ import annotations

from pathlib import Path

from bench import profiling

ROOT = str(Path(profiling.__file__).resolve().parents[1])
SITE = "/venv/lib/python3.11/site-packages"


def test_samples_are_grouped_by_the_layer_of_their_innermost_frame(tmp_path: Path) -> None:
    run = "thread (0x1);_run_once (/usr/lib/python3.11/asyncio/base_events.py:1900)"
    profile = tmp_path / "coordinator-1.txt"
    profile.write_text(
        "\n".join(
            [
                f"{run};Handle._run (/usr/lib/python3.11/asyncio/events.py:80) 40",
                f"{run};execute ({SITE}/psycopg/cursor_async.py:10) 20",
                f"{run};execute ({SITE}/psycopg/cursor_async.py:12) 5",
                f"{run};_execute_context ({SITE}/sqlalchemy/engine/base.py:1800) 10",
                f"{run};unary_unary ({ROOT}/coordinator/api/request_limits.py:200) 10",
                f"{run};Enqueue ({ROOT}/coordinator/api/scheduler.py:50) 10",
                f"{run};select (/usr/lib/python3.11/selectors.py:468) 5",
                "not a sample line",
            ]
        )
        + "\n"
    )
    summary = profiling.render_grouped([profile], "profile")
    shares = {
        cells[2]: cells[1]
        for line in summary.splitlines()
        if (cells := [c.strip() for c in line.split("|")]) and len(cells) == 4
    }
    assert shares["gRPC (grpc.aio callbacks, protobuf)"] == "40.0%"
    assert shares["driver (psycopg)"] == "25.0%"  # two lines of one frame: one frame
    assert shares["SQL layer (SQLAlchemy)"] == "10.0%"
    assert shares["interceptors"] == "10.0%"
    assert shares["engine (coordinator's own code)"] == "10.0%"
    assert shares["asyncio, threads and the rest"] == "5.0%"
    # Frames are named from their package on, line numbers dropped, most samples first.
    frames = [line for line in summary.splitlines() if line.startswith("| ") and "`" in line]
    assert frames[1] == "| 25.0% | `execute (psycopg/cursor_async.py)` | driver (psycopg) |"
    assert any("`Enqueue (coordinator/api/scheduler.py)` | engine" in f for f in frames)


def test_no_samples_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "coordinator-1.txt"
    empty.write_text("")
    assert "no samples" in profiling.render_grouped([empty], "profile")
