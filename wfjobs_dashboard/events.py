"""Live updates: the coordinator's job event stream relayed to a page as server-sent events."""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from worker_sdk import JobEventFilter, WorkflowJobsError

from .site import SITE, Site, error_text

# An event stream with nothing to say sends a comment this often, so a closed
# browser tab is noticed and its watch ended.
EVENTS_KEEPALIVE_S = 15.0


async def event_stream(request: web.Request, event_filter: JobEventFilter) -> web.StreamResponse:
    """Tell the page each time a job it shows changes: ``event: change`` per batch.

    The page then fetches its live part again (at most once a second). A
    watch the coordinator refuses (a token without the scheduler role)
    ends with ``event: unavailable``, and the page goes back to polling.
    """
    site, session = Site.of(request)
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
        }
    )
    await response.prepare(request)
    changes: asyncio.Queue[str | WorkflowJobsError] = asyncio.Queue()

    placed = asyncio.Event()

    async def pump() -> None:
        try:
            async for event in site.backend.watch(session.token, event_filter, placed):
                changes.put_nowait(event.cursor)
        except WorkflowJobsError as exc:
            changes.put_nowait(exc)

    pumping = asyncio.get_running_loop().create_task(pump())
    task = asyncio.current_task()
    if task is not None:
        site.streams.add(task)
    try:
        # "ready" once the coordinator has placed the watch (or refused it): a
        # change committed after the page hears "ready" is never missed.
        waiting = asyncio.ensure_future(placed.wait())
        await asyncio.wait({waiting, pumping}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        await response.write(b"retry: 5000\nevent: ready\ndata: watching\n\n")
        while True:
            try:
                async with asyncio.timeout(EVENTS_KEEPALIVE_S):
                    item = await changes.get()
            except TimeoutError:
                await response.write(b": keepalive\n\n")
                continue
            # A burst of events is one change for the page.
            batch = [item]
            while not changes.empty():
                batch.append(changes.get_nowait())
            cursors = [c for c in batch if isinstance(c, str)]
            refused = [c for c in batch if isinstance(c, WorkflowJobsError)]
            if cursors:
                await response.write(f"event: change\ndata: {cursors[-1]}\n\n".encode())
            if refused:
                text = error_text(refused[0]).replace("\n", " ")
                await response.write(f"event: unavailable\ndata: {text}\n\n".encode())
                break
    except ConnectionResetError:
        pass  # the page was closed
    finally:
        if task is not None:
            site.streams.discard(task)
        pumping.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pumping
    return response


async def end_streams(app: web.Application) -> None:
    """End every open event stream (the application is shutting down)."""
    for task in list(app[SITE].streams):
        task.cancel()
