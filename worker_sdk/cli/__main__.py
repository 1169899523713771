"""``python -m worker_sdk.cli``: the same as ``wfjobs``."""

from worker_sdk.cli import console

console()
