"""The store runner: store calls run in a thread pool, never on the event loop.

The store's named queries are blocking (SQLAlchemy Core over psycopg or
sqlite3). Everything in the engine, the chores and the operator actions calls
them through one ``StoreRunner``, so the pool is sized once (one thread for
SQLite, whose single connection serialises anyway) and shut down once.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class StoreRunner:
    """``await run(fn, *args, **kwargs)`` runs ``fn`` in the store's threads.

    Typed with ``ParamSpec``: mypy checks the arguments against ``fn``'s own
    signature, so every ``run(store.job_claim, ...)`` is checked against the
    ``Store`` protocol, and a reader follows the call to its query there.
    """

    def __init__(self, threads: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="wfj-store")

    async def __call__(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args, **kwargs))

    def shutdown(self) -> None:
        """Wait for running calls, then release the threads. Idempotent."""
        self._executor.shutdown(wait=True)


__all__ = ["StoreRunner"]
