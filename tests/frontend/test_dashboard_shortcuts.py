"""The fourth dashboard pass's shortcuts equal what they replace (docs/PERFORMANCE.md §6): the
timeline's bars cut and ordered as a full sort would, the shared-interval sweep's fast paths, the
cached charge's per-process copy, an admin's quota use read without narrowing to the visible
tenants' GPUs."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from django.core.cache import cache
from django.test import Client

from cluster.models import GPU, Job, Node, Placement, Tenant
from frontend.payloads import timeline
from frontend.payloads.timeline import shared_intervals
from scheduling.service import window_charge
from scheduling.service.over_quota import quota_use
from tests.frontend.conftest import make_job, session_client

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def sweep(rows: list[tuple]) -> list[tuple[str, float, float]]:
    """The shared intervals by the plain event sweep over every GPU with two or more placements
    (the reference: what ``shared_intervals`` computed before its fast paths)."""
    by_gpu: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r[-1] > r[-2]:
            by_gpu.setdefault(r[0], []).append((r[-2], r[-1]))
    out = []
    for gpu, spans in by_gpu.items():
        events = sorted([(b, 1) for b, _ in spans] + [(e, -1) for _, e in spans])
        held, since = 0, None
        for moment, change in events:
            held += change
            if held >= 2 and since is None:
                since = moment
            elif held < 2 and since is not None:
                if moment > since:
                    out.append((gpu, since, moment))
                since = None
    return out


def test_shared_intervals_by_hand() -> None:
    row = lambda gpu, b, e: (gpu, 0, 1, "j", 7, "t", b, e)  # noqa: E731
    rows = [
        row("a", 0.0, 10.0),
        row("a", 10.0, 20.0),  # touches the first: nothing shared
        row("b", 0.0, 10.0),
        row("b", 5.0, 30.0),  # two: [5, 10]
        row("c", 0.0, 10.0),
        row("c", 10.0, 20.0),
        row("c", 20.0, 30.0),  # a busy GPU, one after another: nothing
        row("d", 0.0, 10.0),
        row("d", 10.0, 20.0),
        row("d", 15.0, 25.0),  # the third overlaps the second: [15, 20]
        row("e", 3.0, 3.0),
        row("e", 0.0, 9.0),  # an empty placement shares nothing
    ]
    assert shared_intervals(rows) == [("b", 5.0, 10.0), ("d", 15.0, 20.0)]


def test_shared_intervals_equal_the_plain_sweep_on_random_placements() -> None:
    rng = random.Random(16)
    for _ in range(300):
        rows = []
        for _ in range(rng.randint(1, 25)):
            gpu = f"n:{rng.randint(0, 5)}"
            b = float(rng.randint(0, 40))  # small integers: many ties and touching ends
            e = b + float(rng.randint(0, 12))
            rows.append((gpu, 0, 1, "j", 7, "t", b, e))
        assert shared_intervals(rows) == sweep(rows)


@pytest.fixture
def busy(tenant_a: Any, tenant_c: Any) -> dict[str, Any]:
    """Two GPUs' worth of placements with ties everywhere: running ones begun at one instant,
    ended ones ending at one instant, ones begun before the window (clipped to its start)."""
    node = Node.objects.create(name="t-node", agent_token_hash="x")
    gpus = [GPU.objects.create(node=node, index=i, uuid=f"T-{i}", memory_mb=32000) for i in range(4)]
    start = NOW - timedelta(hours=1)
    spans = [  # (tenant, gpu, created, ended)
        (tenant_a, 0, NOW - timedelta(minutes=30), None),
        (tenant_c, 0, NOW - timedelta(minutes=30), None),  # same begin, same (open) end
        (tenant_a, 1, NOW - timedelta(minutes=30), None),
        (tenant_a, 1, start - timedelta(minutes=5), NOW - timedelta(minutes=30)),  # clipped begin
        (tenant_c, 2, start - timedelta(minutes=9), NOW - timedelta(minutes=30)),  # clipped, same end
        (tenant_c, 2, NOW - timedelta(minutes=50), NOW - timedelta(minutes=30)),
        (tenant_a, 3, NOW - timedelta(minutes=50), NOW - timedelta(minutes=40)),
        (tenant_c, 3, start - timedelta(minutes=20), start - timedelta(minutes=1)),  # before the window
        (tenant_a, 3, NOW - timedelta(minutes=20), NOW + timedelta(minutes=5)),  # ends after now
    ]
    placements = []
    for k, (tenant, g, created, ended) in enumerate(spans):
        job = make_job(tenant, f"job-{k}", status=Job.Status.RUNNING)
        placements.append(
            Placement.objects.create(
                job=job,
                gpu=gpus[g],
                generation=1,
                sub_batch=32,
                slot=1 if k == 1 else 0,  # the two running on GPU 0 share it
                active=ended is None,
                created_at=created,
                ended_at=ended,
            )
        )
    return {"start": start, "placements": placements}


def expected_order(start: datetime, tenant_id: int | None) -> list[str]:
    """The timeline's table labels by hand: the placements of the window (with a tenant, those on
    the GPUs its jobs held), latest clipped end first, then latest clipped begin, then id."""
    rows = [
        p
        for p in Placement.objects.select_related("job")
        if p.created_at < NOW and ((p.ended_at is None and p.active) or (p.ended_at and p.ended_at > start))
    ]
    if tenant_id is not None:
        mine = {p.gpu_id for p in rows if p.job.tenant_id == tenant_id}
        rows = [p for p in rows if p.gpu_id in mine]

    def key(p: Placement) -> tuple[datetime, datetime, int]:
        end = NOW if p.ended_at is None else min(p.ended_at, NOW)
        return end, max(p.created_at, start), p.pk

    return [f"job {p.job_id} {p.job.name}" for p in sorted(rows, key=key, reverse=True)]


@pytest.mark.parametrize("bars", [1, 3, 5, 100])
def test_the_timeline_cut_and_order_equal_a_full_sort(
    busy: dict[str, Any], alice: Any, tenant_a: Any, monkeypatch: pytest.MonkeyPatch, bars: int
) -> None:
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_user("t-admin", is_staff=True)
    monkeypatch.setattr(timeline, "MAX_BARS", bars)
    for user, tenant_id in ((admin, None), (alice, tenant_a.pk)):
        client: Client = session_client(user)
        with mock.patch("django.utils.timezone.now", return_value=NOW):
            body = json.loads(client.get("/dashboard/api/timeline.json").content)
        want = expected_order(busy["start"], tenant_id)
        got = [r[1] for r in body["tables"]["timeline"]["rows"]]
        if tenant_id is not None:  # another tenant's job on the member's GPUs is anonymous
            everyone = Placement.objects.select_related("job")
            names = {f"job {p.job_id} {p.job.name}": p.job.tenant_id for p in everyone}
            want = [w if names[w] == tenant_id else "another tenant's job" for w in want]
        assert got == want[:bars], (user, bars)
        dropped = len(want) - min(bars, len(want))
        note = body["tables"]["timeline"]["note"]
        assert (f"{dropped} placements that ended earlier not drawn." in note) == (dropped > 0)


def test_the_charges_own_copy_follows_changes_and_outlives_a_flushed_shared_cache(
    busy: dict[str, Any],
) -> None:
    lo, hi = (NOW - timedelta(hours=1)).timestamp(), NOW.timestamp()

    def totals(use_cache: bool) -> dict[int, float]:
        part = window_charge(lo, hi, use_cache=use_cache)
        return {
            t: sum(c.bins(lo, hi - lo, 1)[0] for c in (part.closed.get(t), part.open.get(t)) if c)
            for t in {*part.closed, *part.open}
        }

    def same() -> None:
        got, want = totals(True), totals(False)
        assert got.keys() == want.keys()
        for t, v in want.items():
            assert got[t] == pytest.approx(v, rel=1e-12, abs=1e-6)

    same()
    cache.clear()  # the shared cache flushed (another process, a Redis restart): the copy holds
    same()
    # a row committed late into the closed past: the copy's fingerprint no longer matches
    p = busy["placements"][6]
    Placement.objects.create(
        job=p.job,
        gpu=p.gpu,
        generation=1,
        sub_batch=32,
        active=False,
        created_at=NOW - timedelta(minutes=45),
        ended_at=NOW - timedelta(minutes=35),
    )
    same()
    first = busy["placements"][0].pk
    Placement.objects.filter(pk=first).update(active=False, ended_at=NOW - timedelta(minutes=2))
    same()
    Placement.objects.filter(pk=busy["placements"][5].pk).delete()  # a deletion in the closed past
    same()


def test_quota_use_of_every_tenant_equals_the_use_narrowed_to_them(busy: dict[str, Any]) -> None:
    ids = list(Tenant.objects.values_list("pk", flat=True))
    assert quota_use(None) == quota_use(ids)
    # a shared GPU: the partner of another tenant is read either way
    assert quota_use(None)[ids[0]] == quota_use([ids[0]])[ids[0]]


def test_the_job_figures_and_finished_bins_read_together_equal_the_bins_read_alone(
    tenant_a: Any, tenant_c: Any
) -> None:
    from frontend.payloads.bins import finished_bins
    from frontend.payloads.common import raw_rows
    from frontend.payloads.fairness import tenant_jobs_and_bins

    now = NOW
    for k, (tenant, minutes) in enumerate([(tenant_a, 50), (tenant_a, 20), (tenant_c, 5), (tenant_c, 90)]):
        make_job(
            tenant,
            f"done-{k}",
            status=Job.Status.SUCCEEDED,
            submitted_at=now - timedelta(minutes=minutes + 10, seconds=-30),  # mid-bin
            started_at=now - timedelta(minutes=minutes + 4, seconds=-30),
            finished_at=now - timedelta(minutes=minutes, seconds=-30),
        )
    make_job(tenant_a, "waiting", gpus=2, submitted_at=now - timedelta(minutes=7))
    make_job(tenant_c, "running", gpus=4, status=Job.Status.RUNNING, submitted_at=now - timedelta(minutes=3))
    start, width = now - timedelta(hours=1), 120.0
    jobs, bins = tenant_jobs_and_bins(start, now, width)
    assert sorted(bins) == sorted(raw_rows(finished_bins(start, now, width)))
    # by hand: bins of 2 min from the window's start; the job done 90 min ago is outside it
    assert sorted(bins) == [(tenant_a.pk, 0, 5), (tenant_a.pk, 15, 20), (tenant_c.pk, 22, 27)]
    a, c = jobs[tenant_a.pk], jobs[tenant_c.pk]
    assert (a.finished, a.pending, a.in_use, c.finished, c.pending, c.in_use) == (2, 1, None, 2, 0, 4)
    # counts stay whole numbers through the union (its bins sit in the float columns)
    assert all(type(v) is int for v in (a.finished, a.pending, c.finished, c.pending, c.in_use))
    assert a.avg_jct_s == pytest.approx(600.0) and a.avg_queue_s == pytest.approx(360.0)
    assert a.first_active == pytest.approx((now - timedelta(minutes=7)).timestamp())
