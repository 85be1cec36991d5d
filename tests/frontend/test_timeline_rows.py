"""The timeline's kept rows (``frontend.payloads.timeline_rows``) give the JSON built from scratch,
byte for byte, for an admin and for a member, after each kind of change: time passing at a frozen
now, a placement ending, the cutoff moving past it, a placement committed late into the closed
past, one deleted there, a tenant renamed, the window's start moving past kept bars, and random
changes; the kept entry's parts and fingerprints by hand."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.models import GPU, Job, Node, Placement, Tenant
from frontend.payloads import memo, timeline, timeline_rows
from frontend.payloads.common import Viewer
from tests.frontend.conftest import gpu, make_job

NOW = datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
HOUR = 3600


def bodies(viewer: Viewer, at: datetime, window_s: int = HOUR) -> tuple[bytes, bytes]:
    """The timeline's JSON at ``at`` with the kept rows, and built from scratch (the same
    ``generated_at``: both at the frozen now)."""
    with mock.patch("django.utils.timezone.now", return_value=at):
        kept = memo.dumps(timeline.timeline_payload(viewer, window_s))
        afresh = memo.dumps(timeline.timeline_payload(viewer, window_s, cached=False))
    return kept, afresh


def assert_same(viewers: list[Viewer], at: datetime, window_s: int = HOUR) -> bytes:
    """Kept equals from scratch for every viewer; the last viewer's JSON."""
    for viewer in viewers:
        kept, afresh = bodies(viewer, at, window_s)
        assert kept == afresh, viewer
    return kept


def statements(at: datetime, window_s: int = HOUR) -> int:
    """How many statements the kept rows cost for the window ending at ``at``."""
    with CaptureQueriesContext(connection) as queries:
        timeline_rows.kept_rows(at.timestamp() - window_s, at.timestamp(), window_s)
    return len(queries)


def placed(
    tenant: Tenant, name: str, on: GPU, begin: datetime, end: datetime | None, slot: int = 0
) -> Placement:
    job = make_job(tenant, name, status=Job.Status.RUNNING if end is None else Job.Status.SUCCEEDED)
    return Placement.objects.create(
        job=job,
        gpu=on,
        slot=slot,
        sub_batch=32,
        generation=1,
        active=end is None,
        created_at=begin,
        ended_at=end,
    )


@pytest.fixture
def history(tenant_a: Tenant, tenant_c: Tenant, cluster: list[Node]) -> dict[str, Placement]:
    """A's and C's jobs sharing node-00:0 now; A's ended jobs on node-00:1 (two ending at one
    instant, both begun before the window: clipped to its start); C's on node-01:0."""
    m = lambda minutes: NOW - timedelta(minutes=minutes)  # noqa: E731
    return {
        "a-run": placed(tenant_a, "a-run", gpu("node-00", 0), m(20), None),
        "c-run": placed(tenant_c, "c-run", gpu("node-00", 0), m(10), None, slot=1),
        "a-old": placed(tenant_a, "a-old", gpu("node-00", 1), m(70), m(40)),
        "a-old2": placed(tenant_a, "a-old2", gpu("node-00", 1), m(65), m(40)),
        "a-mid": placed(tenant_a, "a-mid", gpu("node-00", 1), m(40), m(25)),
        "c-done": placed(tenant_c, "c-done", gpu("node-01", 0), m(50), m(5)),
        "c-gone": placed(tenant_c, "c-gone", gpu("node-01", 0), m(90), m(61)),  # before the window
    }


def test_kept_rows_equal_the_json_from_scratch_after_each_change(
    history: dict[str, Placement], viewers: list[Viewer], tenant_a: Tenant, tenant_c: Tenant
) -> None:
    admin, alice, charlie = viewers
    assert_same(viewers, NOW)
    entry = timeline_rows.kept(HOUR)
    assert entry is not None
    # by hand: cutoff 30 s before now on the minute grid; the floor the window's start on it
    assert entry.cutoff_s == (NOW.timestamp() - 30) // 60 * 60
    assert entry.floor_s == (NOW - timedelta(hours=1)).timestamp() // 60 * 60
    ids = lambda *names: {history[n].pk for n in names}  # noqa: E731
    assert {r[0] for r in entry.closed} == ids("a-old", "a-old2", "a-mid", "c-done")
    assert entry.fingerprint == (4, sum(ids("a-old", "a-old2", "a-mid", "c-done")))
    assert {r[0] for r in entry.open} == ids("a-run", "c-run")
    assert entry.open_fingerprint == (2, sum(ids("a-run", "c-run")), 0, 0)
    # a member sees the other tenant's job on the GPU they share, anonymously
    body = bodies(charlie, NOW)[0].decode()
    assert "another tenant's job" in body and "team-a" not in body and "a-old" not in body
    # the same now again, and a second later: one statement, nothing read again
    assert_same(viewers, NOW)
    assert statements(NOW + timedelta(seconds=1)) == 1
    assert_same(viewers, NOW + timedelta(seconds=1))
    # A's running job ends now: the open part differs, its ids and ends read again (2 statements)
    Placement.objects.filter(pk=history["a-run"].pk).update(active=False, ended_at=NOW + timedelta(seconds=2))
    assert statements(NOW + timedelta(seconds=3)) == 2
    assert_same(viewers, NOW + timedelta(seconds=3))
    entry = timeline_rows.kept(HOUR)
    assert entry is not None and entry.open_fingerprint == (
        2,
        sum(ids("a-run", "c-run")),
        1,
        history["a-run"].pk,
    )
    # a placement starts: only it is joined (3 statements)
    started = placed(tenant_c, "c-new", gpu("node-01", 1), NOW + timedelta(seconds=3), None)
    assert statements(NOW + timedelta(seconds=4)) == 3
    assert b"c-new" in assert_same(viewers, NOW + timedelta(seconds=4))
    Job.objects.filter(pk=started.job_id).delete()
    assert b"c-new" not in assert_same(viewers, NOW + timedelta(seconds=5))
    # two minutes later the cutoff has moved past that end: the row moved to the closed part,
    # the window's start past no row (nothing read again)
    later = NOW + timedelta(minutes=2)
    assert statements(later) == 1
    assert_same(viewers, later)
    entry = timeline_rows.kept(HOUR)
    assert entry is not None and history["a-run"].pk in {r[0] for r in entry.closed}
    assert entry.open_fingerprint == (1, history["c-run"].pk, 0, 0)
    # a placement committed late into the closed past, then one deleted there
    late = placed(
        tenant_c, "c-late", gpu("node-00", 1), NOW - timedelta(minutes=30), NOW - timedelta(minutes=20)
    )
    assert b"c-late" in assert_same(viewers, later)
    Job.objects.filter(pk=history["a-mid"].job_id).delete()
    assert b"a-mid" not in assert_same(viewers, later)
    # a tenant renamed: its name comes with every request
    Tenant.objects.filter(pk=tenant_c.pk).update(name="team-z")
    assert b"team-z" in assert_same([admin, charlie], later)
    # the window's start moves past kept bars (the floor with it), and then past every one
    for minutes in (30, 45, 58, 200):
        assert_same(viewers, NOW + timedelta(minutes=minutes))
    entry = timeline_rows.kept(HOUR)
    assert entry is not None and late.pk not in {r[0] for r in entry.closed}
    # another window length has an entry of its own
    assert_same(viewers, NOW + timedelta(minutes=200), window_s=86400)
    assert timeline_rows.kept(86400) is not None


def test_clipped_bars_of_one_end_are_ordered_by_id_as_from_scratch(
    history: dict[str, Placement], viewers: list[Viewer]
) -> None:
    """a-old and a-old2 end at one instant, both begun before the window: clipped to its start
    they tie, and the higher id comes first (their kept order, by begin, puts a-old first). Then
    two more runs of such ties (ends shared by several GPUs' placements, some begun in the window)."""
    assert_same(viewers, NOW)
    m = lambda minutes: NOW - timedelta(minutes=minutes)  # noqa: E731
    tenant_a, tenant_c = history["a-old"].job.tenant, history["c-done"].job.tenant
    for k, (begin, end) in enumerate([(61, 35), (75, 35), (45, 35), (62, 35), (80, 33), (90, 33), (34, 33)]):
        placed(
            tenant_a if k % 2 else tenant_c, f"tie{k}", gpu(f"node-0{k % 2}", 2 + k // 4), m(begin), m(end)
        )
    for minutes in (0, 1, 10, 20):
        assert_same(viewers, NOW + timedelta(minutes=minutes))
    admin = viewers[0]
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        rows = timeline.timeline_payload(admin, HOUR)["tables"]["timeline"]["rows"]
    labels = [r[1] for r in rows]
    first, second = sorted((history["a-old"], history["a-old2"]), key=lambda p: -p.pk)
    assert labels.index(f"job {first.job_id} {first.job.name}") < labels.index(
        f"job {second.job_id} {second.job.name}"
    )


@pytest.mark.parametrize("bars", [1, 3, 6])
def test_the_cut_is_the_same(
    history: dict[str, Placement], viewers: list[Viewer], monkeypatch: pytest.MonkeyPatch, bars: int
) -> None:
    monkeypatch.setattr(timeline, "MAX_BARS", bars)
    assert_same(viewers, NOW)
    assert_same(viewers, NOW + timedelta(minutes=3))


def _random_changes(
    rng: random.Random, gpus: list[GPU], tenants: list[Tenant], start: datetime
) -> Iterator[datetime]:
    """Placements started, ended, committed late and deleted at random over three hours, the
    time of each poll after them."""
    now = start
    for step in range(40):
        now += timedelta(seconds=rng.choice([1, 7, 30, 61, 180, 600]))
        for _ in range(rng.randint(0, 3)):
            kind = rng.random()
            if kind < 0.4:  # a placement starts (or started a moment ago) on a free slot
                held = set(Placement.objects.filter(active=True).values_list("gpu_id", "slot"))
                free = [(g, slot) for g in gpus for slot in (0, 1) if (g.pk, slot) not in held]
                if free:
                    on, slot = rng.choice(free)
                    begin = now - timedelta(seconds=rng.randint(0, 5000))
                    placed(rng.choice(tenants), f"r{step}", on, begin, None, slot=slot)
            elif kind < 0.7:  # one ends now (or a little later: the window's end clips it)
                open_ = list(Placement.objects.filter(active=True).values_list("pk", flat=True))
                if open_:
                    end = now + timedelta(seconds=rng.choice([-40, -5, 0, 20]))
                    Placement.objects.filter(pk=rng.choice(open_)).update(active=False, ended_at=end)
            elif kind < 0.85:  # one committed late into the past
                end = now - timedelta(seconds=rng.randint(60, 5000))
                begin = end - timedelta(seconds=rng.randint(0, 3000))
                placed(rng.choice(tenants), f"late{step}", rng.choice(gpus), begin, end)
            else:  # a job deleted with its placements
                jobs = list(Job.objects.values_list("pk", flat=True))
                if jobs:
                    Job.objects.filter(pk=rng.choice(jobs)).delete()
        yield now


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_rows_equal_from_scratch_over_random_changes(
    viewers: list[Viewer], tenant_a: Tenant, tenant_c: Tenant, cluster: list[Node], seed: int
) -> None:
    rng = random.Random(seed)
    gpus = list(GPU.objects.order_by("node__name", "index"))
    for now in _random_changes(rng, gpus, [tenant_a, tenant_c], NOW):
        assert_same(viewers, now, window_s=rng.choice([HOUR, HOUR, 300, 60]))
