"""Optional sampling profiles of the coordinator while a figure runs (py-spy).

`python -m bench --profile DIR figure` (or BENCH_PROFILE=DIR) attaches
`py-spy record` to every coordinator the bench starts and writes one
collapsed-stack file per coordinator into DIR (plus, with `--idle`, the
GIL-free wait time too). `python -m bench.profiling FILE...` summarises such
files: the functions with the most samples, self and inclusive, so the next
bottleneck is named by a measurement. Profiling slows the coordinator down a
little; do not quote figures from a profiled run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from bench.processes import ManagedProcess

ENV = "BENCH_PROFILE"


def profile_dir() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def attach(pid: int, label: str) -> ManagedProcess | None:
    """Start py-spy on `pid` if profiling is on; it stops when the process exits."""
    directory = profile_dir()
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    output = directory / f"{label}-{time.strftime('%H%M%S')}-{pid}.txt"
    return ManagedProcess(
        f"py-spy-{label}",
        [
            py_spy,
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "200",
            *os.environ.get("BENCH_PROFILE_FLAGS", "--gil").split(),
            "--output",
            str(output),
            "--nonblocking",
        ],
        deadline_s=3600,
    )


def summarise(paths: list[Path], top: int = 25) -> str:
    """Top functions by self and inclusive samples over collapsed-stack files."""
    self_samples: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for path in paths:
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = stack.split(";")
            total += count
            self_samples[frames[-1]] += count
            for frame in set(frames):
                inclusive[frame] += count
    if total == 0:
        return "no samples"
    lines = [f"{total} samples", "", "self:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in self_samples.most_common(top)]
    lines += ["", "inclusive:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="summarise py-spy collapsed stacks")
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(summarise(args.files, args.top))


if __name__ == "__main__":
    main()
