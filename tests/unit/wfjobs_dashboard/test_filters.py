"""The jobs list's filter: one table of fields read from a query, written to
forms, read back from them, made a JobFilter and worded."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from types import SimpleNamespace

from wfjobs_dashboard import filters

SESSION = SimpleNamespace(tenant_id="")


def _every_field_set() -> filters.FilterValues:
    fields = {f.name: f"v-{f.name}" for f in filters.TEXT_FIELDS}
    fields["job_type"] = "a, b"
    fields.update({f.name: "2026-12-04T02:06:49.007883" for f in filters.TIME_FIELDS})
    return filters.FilterValues(
        statuses=("PENDING", "FAULTED"),
        tenant_id="acme",
        category="INTEGRATION",
        fields=fields,
        q="needle",
        q_in="payload",
        order="oldest",
        page_size=7,
    )


def test_a_form_repeating_a_list_reads_back_as_the_same_list() -> None:
    values = _every_field_set()
    form = filters.form_fields(values)
    assert filters.read_form(form, SESSION) == values  # type: ignore[arg-type]


def test_every_field_reaches_the_job_filter_and_the_wording() -> None:
    values = _every_field_set()
    job_filter = filters.job_filter(values)
    assert job_filter.job_types == ["a", "b"]
    for f in filters.TEXT_FIELDS[1:]:
        assert getattr(job_filter, f.name) == f"v-{f.name}"
    at = datetime(2026, 12, 4, 2, 6, 49, 7883, tzinfo=UTC)
    for f in filters.TIME_FIELDS:
        assert getattr(job_filter, f.name) == at, f.name
    text = filters.describe(values)
    for f in filters.TEXT_FIELDS + filters.TIME_FIELDS:
        assert f.label in text
    # A time as every surface writes one (workflowjobs.times), to the millisecond.
    assert "due before 2026-12-04 02:06:49.007 UTC" in text
    assert "tenant acme" in text and "category integration" in text
    assert "payload text search 'needle'" in text
    unset = dataclasses.replace(values, fields={}, statuses=(), tenant_id="", category="", q="")
    assert filters.describe(unset) == "every job"
