"""``python -m coordinator`` on a host whose wall clock is off.

Test-only wrapper: ``WFJOBS_TEST_CLOCK_SKEW_S`` (read here and nowhere else)
seconds are added to ``time.time()`` and ``time.time_ns()`` before the
coordinator is imported, which is what a host with a wrong clock looks like
to the process; the monotonic clock is left alone, as on such a host.
"""

from __future__ import annotations

import os
import sys
import time

SKEW_NS = int(float(os.environ.get("WFJOBS_TEST_CLOCK_SKEW_S", "0")) * 1_000_000_000)
_time, _time_ns = time.time, time.time_ns
time.time = lambda: _time() + SKEW_NS / 1e9
time.time_ns = lambda: _time_ns() + SKEW_NS

from coordinator.__main__ import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
