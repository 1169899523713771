"""The dashboard's pages as templates: payload display, trace ids, escaping, charts,
forms; and its listen checks."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from wfjobs_dashboard import is_loopback, split_listen
from wfjobs_dashboard.backend import Bucket, _percentile
from wfjobs_dashboard.site import page_html
from wfjobs_dashboard.templating import ENV
from wfjobs_dashboard.views import bar_chart, line_chart, trace_id
from workflowjobs.v1 import admin_service_pb2 as apb

SESSION = SimpleNamespace(
    csrf="c", tenant_id="", name="op", logged_in=True, by_login=False, flash=[]
)


def macro(name: str) -> Any:
    return getattr(ENV.get_template("macros.html").make_module({"csrf": "c", "back": "/"}), name)


def payload_html(data: bytes, content_type: str) -> str:
    return str(macro("payload_view")(data, content_type))


def chart_svg(chart: Any) -> str:
    return str(macro("chart")(chart))


def page(template: str, **values: Any) -> str:
    return page_html(template, "Title", SESSION, path="/", **values)  # type: ignore[arg-type]


def pauses_body(active: list[Any], history: list[Any], prefill: dict[str, str]) -> str:
    return page(
        "pauses.html", active=active, history=history, prefill=prefill, now=datetime.now(UTC)
    )


def limits_body(limits: list[Any]) -> str:
    return page("limits.html", limits=limits, rates=[])


def rate_limits_body(rates: list[Any]) -> str:
    html = page("limits.html", limits=[], rates=rates)
    return html[html.index("<h2>Rate limits</h2>") :]


def test_json_payloads_are_pretty_printed_and_escaped() -> None:
    html = payload_html(b'{"b": 1, "a": "<script>alert(1)</script>"}', "application/json")
    assert "application/json, 42 bytes" in html
    assert "&#34;a&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;,\n  &#34;b" in html
    assert "<script>" not in html


def test_other_bytes_show_as_hex_with_their_size() -> None:
    html = payload_html(bytes(range(40)), "application/octet-stream")
    assert "application/octet-stream, 40 bytes" in html
    assert "00 01 02 03" in html and "\n20 21 22" in html


def test_long_binary_payloads_show_their_start_and_say_so() -> None:
    html = payload_html(b"\xff" * 5000, "application/x-protobuf")
    assert "5000 bytes (first 4096 shown)" in html


def test_undecodable_json_falls_back_to_hex() -> None:
    html = payload_html(b"\xff\xfe{", "application/json")
    assert "3 bytes" in html and "ff fe 7b" in html


def test_empty_payload() -> None:
    assert "(empty)" in payload_html(b"", "application/json")


def test_trace_id_comes_from_a_w3c_traceparent() -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert trace_id(parent) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert trace_id("") == ""
    assert trace_id("garbage") == ""


def _buckets(values: list[tuple[int, int, int, float | None]]) -> list[Bucket]:
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    return [
        Bucket(start + timedelta(minutes=5 * i), c, f, r, lat, lat and lat * 2, 1 if lat else 0)
        for i, (c, f, r, lat) in enumerate(values)
    ]


def test_throughput_chart_counts_completions_and_draws_a_bar_per_nonzero_value() -> None:
    svg = chart_svg(
        bar_chart(
            "Throughput",
            _buckets([(3, 1, 0, None), (0, 0, 0, None), (2, 0, 2, None)]),
            (("completed", "ok"), ("failed", "bad"), ("retried", "warn")),
            "completed",
        )
    )
    assert "5 completed in the last hour" in svg
    assert svg.count("<rect") == 4


def test_latency_chart_draws_p50_and_p95_where_there_are_samples() -> None:
    svg = chart_svg(
        line_chart("Latency", _buckets([(1, 0, 0, 0.5), (0, 0, 0, None), (1, 0, 0, 1.5)]))
    )
    assert svg.count('<polyline class="p50"') == 1
    assert svg.count("<circle") == 4
    assert "2 completed jobs sampled" in svg
    assert "no completions" in chart_svg(line_chart("Latency", _buckets([(0, 0, 0, None)])))


def test_percentiles() -> None:
    assert _percentile([2.0], 95) == 2.0
    assert _percentile([float(n) for n in range(1, 101)], 50) == pytest.approx(50.5)


@pytest.mark.parametrize(
    ("listen", "loopback"),
    [
        ("127.0.0.1:8080", True),
        ("localhost:8080", True),
        ("[::1]:8080", True),
        ("0.0.0.0:8080", False),
        (":8080", False),
        ("10.1.2.3:8080", False),
        ("dash.example.com:8080", False),
    ],
)
def test_what_counts_as_loopback(listen: str, loopback: bool) -> None:
    assert is_loopback(listen) is loopback


def test_a_listen_address_needs_a_port() -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        split_listen("127.0.0.1")


def test_the_dashboard_imports_nothing_of_the_coordinator() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import pkgutil, importlib, wfjobs_dashboard\n"
        "for m in pkgutil.iter_modules(wfjobs_dashboard.__path__):\n"
        "    importlib.import_module('wfjobs_dashboard.' + m.name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'coordinator'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _options(html: str, form: str) -> list[tuple[str, str]]:
    start = html.index(f'id="{form}"') if form else 0
    select = html[html.index('<select name="kind">', start) : html.index("</select>", start)]
    return re.findall(r'<option value="([a-z_]+)"[^>]*>([^<]*)</option>', select)


def test_the_scope_kinds_offered_are_the_contract_s() -> None:
    pauses = pauses_body([], [], {})
    assert _options(pauses, "pause-form") == [
        ("definition", "definition"),
        ("instance", "instance"),
        ("job_type", "job type"),
        ("category", "category"),
        ("tenant", "tenant (disables it)"),
    ]
    assert sorted(k for k, _ in _options(pauses, "pause-form")) == sorted(
        n.removeprefix("PAUSE_SCOPE_KIND_").lower() for n in apb.PauseScopeKind.keys()[1:]
    )
    for html in (limits_body([]), rate_limits_body([])):
        assert _options(html, "") == [
            (
                n.removeprefix("LIMIT_SCOPE_KIND_").lower(),
                n.removeprefix("LIMIT_SCOPE_KIND_").lower().replace("_", " "),
            )
            for n in apb.LimitScopeKind.keys()[1:]
        ]
        assert [label for _, label in _options(html, "")] == [
            "tenant",
            "job type",
            "definition",
            "concurrency key",
            "category",
        ]


def test_the_pause_history_names_who_lifted_each_pause_or_its_expiry() -> None:
    from worker_sdk import PauseRecord, PauseScope

    scope = PauseScope.from_proto(apb.PauseScope(kind=apb.PAUSE_SCOPE_KIND_JOB_TYPE, value="t"))
    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    history = [
        PauseRecord("1", scope, "alice", "by hand", at, lift_time=at, lifted_by="bob"),
        # A coordinator without authentication, lifted by a caller naming no one.
        PauseRecord("2", scope, "", "anonymous", at, lift_time=at),
        PauseRecord("3", scope, "alice", "lapsed", at, expire_time=at),
        PauseRecord(
            "4", scope, "alice", "holding", at, expire_time=datetime(2999, 1, 1, tzinfo=UTC)
        ),
    ]
    html = pauses_body([], history, {})
    rows = html[html.index("<h2>History</h2>") :].split("<tr>")[2:]
    lifted = [re.findall(r"<td>([^<]*)</td>", row)[-1] for row in rows]
    assert lifted == [
        "2026-12-01 12:00:00 UTC by bob",
        "2026-12-01 12:00:00 UTC by unauthenticated",
        "2026-12-01 12:00:00 UTC by expiry",
        "active",
    ]


def test_rate_limits_show_their_period_and_when_they_next_admit() -> None:
    from worker_sdk import LimitKind, RateLimit

    html = rate_limits_body(
        [
            RateLimit(LimitKind.TENANT, "initech", 5, timedelta(seconds=2), 3),
            RateLimit(
                LimitKind.CATEGORY,
                "3",
                1,
                timedelta(minutes=1),
                1,
                throttled_until=datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
                slow_level=1,
            ),
        ]
    )
    assert "5 per 2s, burst 3" in html and "admitting" in html
    assert "1 per 60s, burst 1" in html and "integration" in html
    assert "until 2026-12-01 12:00" in html
    assert "1/2 after push-back" in html


def test_concurrency_limits_show_running_of_max_and_a_category_by_name() -> None:
    from worker_sdk import ConcurrencyLimit, LimitKind

    html = limits_body(
        [
            ConcurrencyLimit(LimitKind.JOB_TYPE, "noop", 7, 2),
            ConcurrencyLimit(LimitKind.CATEGORY, "3", 2),
        ]
    )
    assert "2 / 7" in html and "noop" in html
    assert "0 / 2" in html and "integration" in html


# Text an attacker controls (job types, ids, errors, reasons, payloads) as markup.
HOSTILE = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>"


def _hostile_job(status: int) -> Any:
    from worker_sdk import JobView
    from workflowjobs.v1 import job_pb2

    message = job_pb2.Job(
        id=HOSTILE,
        job_type=HOSTILE,
        tenant_id=HOSTILE,
        workflow=job_pb2.WorkflowRef(
            definition_id=HOSTILE,
            instance_id=HOSTILE,
            activity_id=HOSTILE,
            correlation_id=HOSTILE,
        ),
        payload=job_pb2.Payload(content_type="application/json", data=b'{"x": "' + b"<b>" + b'"}'),
        result=job_pb2.Payload(content_type=HOSTILE, data=HOSTILE.encode()),
        status=status,
        lease_owner=HOSTILE,
        last_error=HOSTILE,
        idempotency_key="schedule:" + HOSTILE + "@2026-01-01T00:00:00Z",
        concurrency_key=HOSTILE,
        replay_of=HOSTILE,
        parent_job_id=HOSTILE,
        cancel_reason=HOSTILE,
        group_id=HOSTILE,
        attempts=[
            job_pb2.JobAttempt(number=1, worker_id=HOSTILE, error=HOSTILE, traceback=HOSTILE)
        ],
    )
    return JobView.from_proto(message)


def _no_markup_from_values(html: str) -> None:
    assert "<script>" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&#39;&gt;&lt;img" in html


@pytest.mark.parametrize("status", [1, 2, 3, 4, 5])
def test_a_job_page_escapes_every_value(status: int) -> None:
    from wfjobs_dashboard.views import JobPage

    job = _hostile_job(status)
    reason = apb.WaitReason(kind=apb.WaitReason.KIND_PAUSED, message=HOSTILE)
    html = page(
        "job.html",
        view=JobPage(job, reasons=[reason]),
        now=datetime.now(UTC),
        definition_paused=False,
        retry_policy=HOSTILE,
        live="/live/jobs/x",
        events="",
    )
    _no_markup_from_values(html)


def test_lists_pauses_and_confirmations_escape_every_value() -> None:
    from wfjobs_dashboard.filters import FilterValues
    from wfjobs_dashboard.views import JobListing
    from worker_sdk import PauseRecord

    job = _hostile_job(1)
    values = FilterValues(tenant_id=HOSTILE, fields={"job_type": HOSTILE}, q=HOSTILE)
    html = page(
        "jobs.html",
        values=values,
        listing=JobListing([job], total=1, note=HOSTILE),
        now=datetime.now(UTC),
        other_order="oldest",
        page_href=lambda **extra: "/jobs?" + HOSTILE,
        bulk_fields={"tenant_id": HOSTILE},
        flash=[("error", HOSTILE)],
    )
    _no_markup_from_values(html)
    pause = PauseRecord.from_proto(
        apb.PauseRecord(
            id=HOSTILE,
            scope=apb.PauseScope(kind=apb.PAUSE_SCOPE_KIND_JOB_TYPE, value=HOSTILE),
            reason=HOSTILE,
            actor=HOSTILE,
            lifted_by=HOSTILE,
        )
    )
    _no_markup_from_values(pauses_body([pause], [pause], {"value": HOSTILE}))
    confirm = page(
        "confirm.html", summary=HOSTILE, fields={"reason": HOSTILE}, danger=True, back_to=HOSTILE
    )
    _no_markup_from_values(confirm)


def test_every_template_escapes_by_default() -> None:
    names = ENV.list_templates()
    assert "layout.html" in names and "macros.html" in names
    assert ENV.autoescape is True  # for every template, whatever its name
    assert ENV.from_string("{{ v }}").render(v=HOSTILE).startswith("&lt;script&gt;")


def test_the_workers_page_marks_a_stale_worker_and_only_it() -> None:
    from wfjobs_dashboard import templating
    from worker_sdk import WorkerView

    html = templating.render(
        "workers_live.html",
        SESSION,  # type: ignore[arg-type]
        workers=[
            WorkerView("w-gone", coordinator_id="dead", stale=True),
            WorkerView("w-here", coordinator_id="live"),
        ],
        stats=SimpleNamespace(draining=False),
        now=datetime.now(UTC),
    )
    [gone, here] = html.split("<tr>")[-2:]
    assert "w-gone" in gone and ">stale</span>" in gone
    assert "w-here" in here and ">stale</span>" not in here
