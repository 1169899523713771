"""``python -m worker_sdk.cli``: the same as ``wfjobs``."""

import sys

from worker_sdk.cli import main

sys.exit(main())
