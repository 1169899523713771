"""An HTTP endpoint that answers from an inline job, with the standard library only.

Small quotes are priced inside the request (inline: recorded, leased and
heartbeated like any job); big ones, or any that outgrow a one-second budget,
are handed off to a worker and answered with 202 and the job id to poll.

Run, with a coordinator at 127.0.0.1:50051 (``make run``)::

    python examples/inline_http.py --worker          # terminal 2: finishes handed-off quotes
    python examples/inline_http.py --port 8000       # terminal 3: the HTTP endpoint
    curl 'http://127.0.0.1:8000/quote?items=3'       # 200 {"items": 3, "total_cents": 2970, ...}
    curl 'http://127.0.0.1:8000/quote?items=5000'    # 202 {"job_id": "...", "status": "handed_off"}
"""

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

from worker_sdk import InlineRunner, JobContext, Worker


@dataclass
class QuoteRequest:
    items: int
    priced: int = 0  # items priced so far: the checkpoint when handed off


def price_quote(quote: QuoteRequest, ctx: JobContext) -> dict[str, Any]:
    """The one handler, run inline by the endpoint and remotely by the worker."""
    if ctx.is_inline and quote.items > 1000:
        ctx.hand_off(quote, reason="too big to price within a request")
    total = 0
    for n in range(quote.priced, quote.items):
        total += 990 if n < 100 else 890  # volume discount after 100 items
        ctx.checkpoint(QuoteRequest(quote.items, n + 1))
    return {"items": quote.items, "total_cents": total, "priced_inline": ctx.is_inline}


def make_app(runner: InlineRunner) -> Callable[..., list[bytes]]:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        items = int(query.get("items", ["1"])[0])
        result = runner.run_sync(
            "quote.price",
            QuoteRequest(items),
            budget=timedelta(seconds=1),
            # A retried request (same key) gets the same job, not a second quote.
            idempotency_key=environ.get("HTTP_IDEMPOTENCY_KEY"),
        )
        if result.status == "completed":
            status, body = "200 OK", result.value
        elif result.status in ("handed_off", "queued"):
            status, body = "202 Accepted", {"job_id": result.follow_job_id, "status": result.status}
        else:
            status, body = "500 Internal Server Error", {"error": result.error}
        start_response(status, [("Content-Type", "application/json")])
        return [json.dumps(body).encode()]

    return app


class QuietHandler(WSGIRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--worker", action="store_true", help="run the worker instead")
    args = parser.parse_args()
    worker = Worker(args.target, concurrency=4)
    worker.register("quote.price", price_quote)
    if args.worker:
        worker.run()
        return
    with InlineRunner(worker) as runner:
        server = make_server("127.0.0.1", args.port, make_app(runner), handler_class=QuietHandler)
        print(f"serving on http://127.0.0.1:{server.server_port}", flush=True)
        server.serve_forever()


if __name__ == "__main__":
    main()
