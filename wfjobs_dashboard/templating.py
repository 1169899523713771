"""The pages' templates (Jinja2, ``templates/`` in this package): one per page
over ``layout.html``, with the shared pieces as macros in ``macros.html``.

Autoescaping is on for every template: a value reaches the page escaped
unless a template says otherwise, which none does. ``None`` renders as
nothing. A template is given its page's values (:mod:`.views` computes them)
and, besides, ``csrf`` (the session's token, which every action form
carries) and ``back`` (the page being rendered, where an action's form sends
the browser back to: pages send no Referer).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import jinja2

from worker_sdk import pause_scope, pause_scope_text

from . import filters, views

# The page being rendered (path and query): where an action's form sends the
# browser back to. Forms carry it because pages send no Referer
# (Referrer-Policy: no-referrer); set per request by the app.
PAGE: ContextVar[str] = ContextVar("PAGE", default="/")

ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("wfjobs_dashboard", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    finalize=lambda value: "" if value is None else value,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
)
ENV.filters.update(
    when=views.when,
    age=views.age,
    ago=views.ago,
    actor=views.actor_text,
    pause_kind=views.pause_kind,
    limit_kind=views.limit_kind,
    wait_kind=views.wait_kind,
    pause_jobs_href=views.pause_jobs_href,
)
ENV.globals.update(
    jobs_href=views.jobs_href,
    payload=views.payload,
    scope_text=pause_scope_text,
    pause_scope=pause_scope,
    trace_id=views.trace_id,
    schedule_tick=views.schedule_tick,
    limit_value=views.limit_value,
    UNIQUE_RULES=views.UNIQUE_RULES,
    RETRYABLE=views.RETRYABLE,
    CANCELLABLE=views.CANCELLABLE,
    PAUSE_KINDS=views.PAUSE_KINDS,
    LIMIT_KINDS=views.LIMIT_KINDS,
    STATUSES=filters.STATUSES,
    CATEGORIES=filters.CATEGORIES,
    SEARCH_IN=filters.SEARCH_IN,
    TEXT_FIELDS=filters.TEXT_FIELDS,
    TIME_FIELDS=filters.TIME_FIELDS,
)


def render(template: str, session: Any = None, **values: Any) -> str:
    """``template`` rendered with ``values``, for ``session`` (None: before a login)."""
    csrf = getattr(session, "csrf", "")
    return ENV.get_template(template).render(session=session, csrf=csrf, back=PAGE.get(), **values)
