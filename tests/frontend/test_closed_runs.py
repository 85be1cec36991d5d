"""The kept runs of finished jobs (``scheduling.service.closed_runs``) give every tenant the union of
spans the computation from scratch gives (``gpu_hours.job_spans_afresh``), after each kind of change:
a job finishing in the open part, the cutoff moving on, a job committed late into the closed past,
a deletion, a job moved out of the closed past; the quota panel's JSON with kept runs equals the
JSON built from scratch, for an admin and for a member (who never sees another tenant's name); the
earliest active submission per tenant by hand; a job finished before it was submitted."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.utils import timezone

from cluster.models import Job, Node
from scheduling.service import closed_charge, closed_runs
from scheduling.service.gpu_hours import job_spans_afresh, pending_span_sql
from tests.frontend.conftest import make_job
from tests.frontend.test_endpoints import get

DAY = 86400.0


def covered(
    spans: list[tuple[str, float, float]], lo: float, hi: float
) -> dict[str, list[tuple[float, float]]]:
    """Each tenant's union of ``spans`` clipped to ``[lo, hi]`` as maximal runs (touching join)."""
    parts: dict[str, list[tuple[float, float]]] = {}
    for t, a, b in spans:
        a, b = max(a, lo), min(b, hi)
        if b > a:
            parts.setdefault(t, []).append((a, b))
    out = {}
    for t, ps in parts.items():
        merged: list[tuple[float, float]] = []
        for a, b in sorted(ps):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        out[t] = merged
    return out


def assert_kept_equals_afresh(hi: float) -> None:
    lo = hi - DAY
    assert covered(closed_runs.job_spans(lo, hi), lo, hi) == covered(job_spans_afresh(lo, hi), lo, hi)


def finished(tenant: Any, name: str, since_h: float, until_h: float, now: Any) -> Job:
    job = make_job(tenant, name, submitted_at=now - timedelta(hours=since_h))
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.SUCCEEDED, finished_at=now - timedelta(hours=until_h)
    )
    return job


def test_kept_runs_follow_every_change(cluster: list[Node], tenant_a: Any, tenant_c: Any) -> None:
    now = timezone.now()
    hi = now.timestamp()
    # team-a: 23 → 20 h and 6 → 4 h ago (a gap), team-c 10 → 2 h ago; team-a waiting since 3 h
    finished(tenant_a, "a1", 23, 20, now)
    a2 = finished(tenant_a, "a2", 6, 4, now)
    finished(tenant_c, "c1", 10, 2, now)
    make_job(tenant_a, "a-wait", submitted_at=now - timedelta(hours=3))
    assert_kept_equals_afresh(hi)
    kept = closed_runs.kept(DAY)
    assert kept is not None
    # by hand: a1, a2 and c1 are closed (ended before the cutoff); team-a's gap is kept
    assert sorted((t, round(hi - b), round(hi - e)) for t, b, e in kept.runs) == [
        (str(tenant_a.pk), 6 * 3600, 4 * 3600),
        (str(tenant_a.pk), 23 * 3600, 20 * 3600),
        (str(tenant_c.pk), 10 * 3600, 2 * 3600),
    ]
    assert kept.fingerprint[0] == 3
    # a job finishing just now (the open part), then the cutoff moving on past it
    recent = finished(tenant_c, "c-now", 1, 0, now)
    Job.objects.filter(pk=recent.pk).update(finished_at=now)
    assert_kept_equals_afresh(hi)
    assert_kept_equals_afresh(hi + 300)  # advanced: c-now is closed now
    advanced = closed_runs.kept(DAY)
    assert advanced is not None and advanced.fingerprint == (
        4,
        kept.fingerprint[1] + recent.pk,
        kept.fingerprint[2] + tenant_c.pk,
    )
    # a job committed late into the closed past, bridging team-a's gap
    finished(tenant_a, "a-late", 21, 5, now)
    assert_kept_equals_afresh(hi + 300)
    # a deletion in the closed past
    a2.delete()
    assert_kept_equals_afresh(hi + 300)
    # a finished job moved out of the closed past (finished again later, as a re-run would)
    Job.objects.filter(name="c1").update(finished_at=now + timedelta(seconds=290))
    assert_kept_equals_afresh(hi + 300)
    # another tenant's data deleted with the tenant
    tenant_c.delete()
    assert_kept_equals_afresh(hi + 300)
    # and a day later the floor is rebuilt, the old spans out of the window
    assert_kept_equals_afresh(hi + DAY - 600)


def test_a_changed_closed_past_is_seen_only_through_the_fingerprint(
    cluster: list[Node], tenant_a: Any, tenant_c: Any
) -> None:
    """Without the fingerprint's rebuild a late row in the closed past would be missed: team-c's
    late job makes it active over the day only in the answer from scratch."""
    now = timezone.now()
    hi = now.timestamp()
    finished(tenant_c, "c1", 5, 4, now)
    closed_runs.job_spans(hi - DAY, hi)
    finished(tenant_c, "c-late", 20, 6, now)
    kept = closed_runs.job_spans(hi - DAY, hi)
    runs = covered(kept, hi - DAY, hi)[str(tenant_c.pk)]
    assert [(round(hi - a), round(hi - b)) for a, b in runs] == [(20 * 3600, 6 * 3600), (5 * 3600, 4 * 3600)]


def _fresh_body(client: Client) -> dict[str, Any]:
    cache.clear()
    closed_charge.forget()
    closed_runs.forget()
    body = get(client, "quota")
    return {k: v for k, v in body.items() if k != "generated_at"}


@pytest.mark.parametrize("viewer", ["admin_web", "alice_web"])
def test_quota_json_with_kept_runs_equals_it_from_scratch(
    cluster: list[Node], tenant_a: Any, tenant_c: Any, viewer: str, request: Any
) -> None:
    client = request.getfixturevalue(viewer)
    now = timezone.now()
    for i in range(6):  # each tenant busy in turns over the day
        finished(tenant_a if i % 2 else tenant_c, f"j{i}", 24 - 4 * i, 21 - 4 * i, now)
    make_job(tenant_c, "c-wait", submitted_at=now - timedelta(hours=13))

    def kept_body() -> dict[str, Any]:
        get(client, "quota")  # the entry built (or advanced) by a first poll
        return {k: v for k, v in get(client, "quota").items() if k != "generated_at"}

    assert kept_body() == _fresh_body(client)
    get(client, "quota")
    finished(tenant_a, "late", 12, 2, now)  # late into the closed past
    assert kept_body() == _fresh_body(client)
    get(client, "quota")
    Job.objects.filter(name="j1").delete()
    body = kept_body()
    assert body == _fresh_body(client)
    text = repr(body)
    if viewer == "alice_web":  # a member of team-a never sees team-c's name
        assert "team-c" not in text and "team-a" in text
    else:
        assert "team-c" in text


def test_earliest_active_submission_per_tenant_by_hand(
    cluster: list[Node], tenant_a: Any, tenant_c: Any
) -> None:
    """``pending_span_sql``: per tenant the earliest submission of its pending or running jobs
    submitted before the window's end; a finished, a cancelled and a later job do not count, and
    a tenant with none gets NULL."""
    now = timezone.now()
    hi = now - timedelta(minutes=1)
    make_job(tenant_a, "a-wait", submitted_at=now - timedelta(hours=3))
    running = make_job(tenant_a, "a-run", submitted_at=now - timedelta(hours=5))
    Job.objects.filter(pk=running.pk).update(status=Job.Status.RUNNING, started_at=now)
    finished(tenant_a, "a-done", 10, 9, now)
    make_job(tenant_a, "a-cancelled", status=Job.Status.CANCELLED, submitted_at=now - timedelta(hours=8))
    make_job(tenant_a, "a-later", submitted_at=now)  # after the window's end
    make_job(tenant_c, "c-later", submitted_at=now)
    sql, params = pending_span_sql(hi)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = {t: b for t, b in cursor.fetchall()}
    assert rows.keys() == {tenant_a.pk, tenant_c.pk}
    assert rows[tenant_c.pk] is None
    assert rows[tenant_a.pk] == pytest.approx((now - timedelta(hours=5)).timestamp(), abs=1e-3)
    # and a job of team-c pending since 2 h: its own earliest
    make_job(tenant_c, "c-wait", submitted_at=now - timedelta(hours=2))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = {t: b for t, b in cursor.fetchall()}
    assert rows[tenant_c.pk] == pytest.approx((now - timedelta(hours=2)).timestamp(), abs=1e-3)


def test_a_job_finished_before_it_was_submitted_covers_nothing(
    cluster: list[Node], tenant_a: Any, tenant_c: Any
) -> None:
    """Neither kept nor read after the cutoff, a job whose finish precedes its submission (a
    clock step) changes no tenant's union, kept or from scratch, in the closed past or after."""
    now = timezone.now()
    hi = now.timestamp()
    finished(tenant_c, "c1", 5, 4, now)
    finished(tenant_c, "c-odd", 3, 6, now)  # finished 6 h ago, submitted 3 h ago
    finished(tenant_a, "a-odd-now", 0.001, 0.002, now)  # after the cutoff
    assert_kept_equals_afresh(hi)
    kept = closed_runs.kept(DAY)
    assert kept is not None and kept.fingerprint[0] == 1  # c1 only
    runs = covered(closed_runs.job_spans(hi - DAY, hi), hi - DAY, hi)
    assert list(runs) == [str(tenant_c.pk)]
    assert [(round(hi - a), round(hi - b)) for a, b in runs[str(tenant_c.pk)]] == [(5 * 3600, 4 * 3600)]
    assert_kept_equals_afresh(hi + 600)
