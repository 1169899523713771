"""A worker in fifteen lines. Run: python examples/worker.py [--target HOST:PORT]

Without --target it connects as wfjobs does: WFJOBS_TARGET, WFJOBS_CA,
WFJOBS_TOKEN, WFJOBS_LOAD_BALANCING or a wfjobs profile, else 127.0.0.1:50051.
"""

import argparse
from dataclasses import dataclass

from worker_sdk import JobContext, Worker


@dataclass
class Greeting:
    name: str


args = argparse.ArgumentParser()
args.add_argument("--target")
worker = Worker(args.parse_args().target, concurrency=10)


@worker.handler("hello")
async def hello(greeting: Greeting, ctx: JobContext) -> dict[str, str]:
    ctx.logger.info("hello, %s (attempt %d)", greeting.name, ctx.attempt)
    return {"greeting": f"Hello, {greeting.name}!"}


if __name__ == "__main__":
    worker.run()
