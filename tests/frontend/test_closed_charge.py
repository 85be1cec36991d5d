"""The dashboard's cached charge (scheduling/service/closed_charge.py) equals the computation from
scratch (``usage_bins`` of ``charged_segments``) after every kind of change: time passing (the
cutoff moving on), a placement starting, one ending, a late slowdown ξ of an open placement that
re-splits its ended partner's past, a row committed late into the past and a ξ written to an
ended row. Both sides are compared bin by bin, up to float rounding (1e-6 GPU-s); the shares
are checked by hand where they change."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache

from cluster.models import GPU, Job, Node, Placement, Tenant
from frontend.payloads import fairness
from frontend.payloads.bins import curve_bins, usage_bins
from frontend.payloads.common import viewer_of
from scheduling.service import charged_segments, closed_charge, window_charge

pytestmark = pytest.mark.django_db

T0 = 1_800_000_000  # a multiple of the cutoff's step (60 s)
WINDOW_S, BINS = 3600, 30


def at(s: float) -> datetime:
    return datetime.fromtimestamp(T0 + s, tz=UTC)


@pytest.fixture
def world() -> dict[str, Any]:
    """Two tenants, 4 GPUs, and jobs that will be placed by the tests."""
    t1, t2 = Tenant.objects.create(name="t1"), Tenant.objects.create(name="t2")
    node = Node.objects.create(name="n0", agent_token_hash="x")
    gpus = [GPU.objects.create(node=node, index=i, uuid=f"G{i}", memory_mb=32000) for i in range(4)]
    jobs = {
        name: Job.objects.create(
            tenant=tenant, name=name, model="resnet50", batch_size=64, iterations=10, gpus=1, status="running"
        )
        for name, tenant in zip("ABCDEF", (t1, t1, t2, t2, t1, t1), strict=True)
    }
    return {"tenants": (t1, t2), "gpus": gpus, "jobs": jobs}


def place(w: dict[str, Any], job: str, gpu: int, begin: float, end: float | None = None, **extra: Any) -> Any:
    return Placement.objects.create(
        job=w["jobs"][job],
        gpu=w["gpus"][gpu],
        generation=1,
        sub_batch=32,
        active=end is None,
        created_at=at(begin),
        ended_at=None if end is None else at(end),
        **extra,
    )


def cached(now: float) -> dict[int, list[float]]:
    start = T0 + now - WINDOW_S
    part = window_charge(start, T0 + now)
    return curve_bins((part.closed, part.open), start, WINDOW_S / BINS, BINS)


def from_scratch(now: float) -> dict[int, list[float]]:
    start = T0 + now - WINDOW_S
    return usage_bins(charged_segments(start, T0 + now), start, WINDOW_S / BINS, BINS)


def same(now: float) -> dict[int, list[float]]:
    got, want = cached(now), from_scratch(now)
    assert got.keys() == want.keys()
    for tenant, values in want.items():  # equal up to float rounding (SQLite's epochs are inexact)
        assert got[tenant] == pytest.approx(values, rel=1e-12, abs=1e-6)
    return want


def test_cached_charge_equals_from_scratch_after_each_change(world: dict[str, Any]) -> None:
    w = world
    place(w, "A", 0, 100, 1000)  # alone, closed: charged once into the curves
    b = place(w, "B", 1, 200, 2000, shared_with=w["jobs"]["C"].pk, predicted_slowdown=1.0)
    c = place(w, "C", 1, 500, None, shared_with=w["jobs"]["B"].pk, predicted_slowdown=3.0)
    place(w, "D", 2, 300, None)  # alone, open
    now = 3600.0
    first = same(now)
    # B pays ξ_C / (ξ_B + ξ_C) = 3/4 of [500, 2000] on GPU 1: 300 alone + 0.75 × 1500 = 1425 GPU-s
    t1 = w["tenants"][0].pk
    assert sum(first[t1]) == pytest.approx(900 + 300 + 1125, abs=1e-3)
    same(now)  # from the cache

    now += 130  # the cutoff moves on two steps: the entry is advanced
    same(now)
    place(w, "E", 0, now - 10)  # a new placement
    same(now)
    Placement.objects.filter(job=w["jobs"]["D"]).update(active=False, ended_at=at(now + 5))  # one ends
    now += 20
    same(now)

    # a late ξ of the open partner re-splits the ended B's past: ξ_B 1 (predicted), ξ_C 1
    # (measured) → ½ each of [500, 2000]
    before = sum(cached(now)[t1])
    Placement.objects.filter(pk=c.pk).update(measured_slowdown=1.0)
    after = same(now)
    assert sum(after[t1]) == pytest.approx(before - 1125 + 750, abs=1e-3)

    # a row committed late into the closed past (say, a transaction that took long)
    place(w, "F", 3, 400, 900)
    same(now)
    # a ξ written to an ended row
    Placement.objects.filter(pk=b.pk).update(measured_slowdown=3.0)
    same(now)
    now += 600  # much later: rows leave the window at its left
    same(now)


def test_a_closed_block_with_an_open_partner_follows_its_late_slowdown(world: dict[str, Any]) -> None:
    # B ended before the cutoff but shared GPU 1 with C, still running: B's past charge must
    # follow C's ξ when it is measured (the taint rule), not stay frozen
    w = world
    place(w, "B", 1, 0, 1200, shared_with=w["jobs"]["C"].pk, predicted_slowdown=1.0)
    c = place(w, "C", 1, 0, None, shared_with=w["jobs"]["B"].pk, predicted_slowdown=1.0)
    now = 3000.0
    t1 = w["tenants"][0].pk
    assert sum(same(now)[t1]) == pytest.approx(600, abs=1e-3)  # ½ of [0, 1200]
    Placement.objects.filter(pk=c.pk).update(measured_slowdown=3.0)
    assert sum(same(now)[t1]) == pytest.approx(900, abs=1e-3)  # 3/4 of [0, 1200]


def test_a_closed_block_re_split_when_its_pair_shares_again(world: dict[str, Any]) -> None:
    # B and C shared GPU 1 and both ended long ago (ξ 1 and 3: B paid 3/4); later they share
    # GPU 2 with new predictions (1 and 1): a pair's ξ is read off its newest rows, so the old
    # block is re-split ½/½ from scratch, and the cached closed block must follow
    w = world
    jb, jc = w["jobs"]["B"].pk, w["jobs"]["C"].pk
    place(w, "B", 1, 0, 1200, shared_with=jc, predicted_slowdown=1.0)
    place(w, "C", 1, 0, 1200, shared_with=jb, predicted_slowdown=3.0)
    now = 3000.0
    t1 = w["tenants"][0].pk
    assert sum(same(now)[t1]) == pytest.approx(900, abs=1e-3)
    place(w, "B", 2, now - 100, None, shared_with=jc, predicted_slowdown=1.0)
    place(w, "C", 2, now - 100, None, shared_with=jb, predicted_slowdown=1.0, slot=1)
    assert sum(same(now)[t1]) == pytest.approx(600 + 50, abs=1e-3)


def test_a_closed_row_overlapping_an_open_one_is_charged_with_it(world: dict[str, Any]) -> None:
    # B ended; C, still open, shared its GPU with no slowdown known (½ each); then C's row is
    # re-paired with a prediction (the service's re-plan) and B's past is re-split
    w = world
    place(w, "B", 1, 0, 1200, shared_with=w["jobs"]["C"].pk, predicted_slowdown=1.0)
    c = place(w, "C", 1, 0, None)
    now = 3000.0
    t1 = w["tenants"][0].pk
    assert sum(same(now)[t1]) == pytest.approx(600, abs=1e-3)
    Placement.objects.filter(pk=c.pk).update(shared_with=w["jobs"]["B"].pk, predicted_slowdown=3.0)
    assert sum(same(now)[t1]) == pytest.approx(900, abs=1e-3)


def test_a_busy_gpu_history_closes_row_by_row(world: dict[str, Any]) -> None:
    # back to back on GPU 0 (each begins as the one before ends) up to C, still running: A and B
    # never share a second with C, so they are charged once into the closed curves, not again on
    # every change of C
    w = world
    place(w, "A", 0, 0, 1000)
    place(w, "B", 0, 1000, 2000)
    place(w, "C", 0, 2000, None)
    now = 3000.0
    t1 = w["tenants"][0].pk
    assert sum(same(now)[t1]) == pytest.approx(1000 + 1000, abs=1e-3)  # A and B, both of tenant t1
    entry = cache.get(f"{closed_charge.KEY}{WINDOW_S // 60}")
    assert entry.tainted == []
    assert set(entry.curves) == {t1}


def test_a_placement_inserted_into_the_closed_past_is_seen(world: dict[str, Any]) -> None:
    w = world
    place(w, "A", 0, 100, 1000)
    now = 3000.0
    same(now)
    place(w, "B", 2, 200, 800)  # committed late: ends long before the cutoff
    t1 = w["tenants"][0].pk
    assert sum(same(now)[t1]) == pytest.approx(900 + 600, abs=1e-3)


def test_fairness_payload_is_unchanged(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole fairness JSON with the cache equals the one computed from scratch."""
    w = world
    place(w, "A", 0, 100, 1000)
    place(w, "B", 1, 200, 2000, shared_with=w["jobs"]["C"].pk, predicted_slowdown=1.0)
    place(w, "C", 1, 500, None, shared_with=w["jobs"]["B"].pk, predicted_slowdown=3.0)
    place(w, "D", 2, 300, None)
    viewer = viewer_of(get_user_model().objects.create_user("root", is_staff=True))

    def body() -> Any:
        with mock.patch("django.utils.timezone.now", return_value=at(3600)):
            return json.loads(json.dumps(fairness.fairness_payload(viewer, WINDOW_S)))

    cached_body = body()
    assert body() == cached_body  # second time from the cache
    monkeypatch.setattr(
        fairness,
        "curve_bins",
        lambda parts, s, width, n: usage_bins(charged_segments(s, s + width * n), s, width, n),
    )
    assert body() == cached_body


def test_two_threads_charging_the_open_part_at_once_keep_curves_and_fingerprint_a_pair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gunicorn's gthread workers share this process's copy of the entry between threads. Thread
    B (open rows of a newer state, fingerprint F2) is stopped between storing its open curves and
    their fingerprint while thread A (an older read, F1) charges its own: had B changed the shared
    entry in place (as before commit d77c30e), the kept entry would end with A's curves beside
    B's fingerprint, and every later poll with F2 would get A's charge. The database is left out
    (its reads replaced per thread) so that the interleaving is forced, not hoped for."""
    import threading

    open_fp = {"seed": (0,), "MainThread": (1,), "B": (2,)}
    # (id, job, tenant, gpu, begin s, end s | None, partner, measured ξ, predicted ξ): one open
    # row, of tenant 1 in the state F1, of tenant 2 in F2
    rows = {"seed": [], "MainThread": [(1, 1, 1, 1, T0 - 600.0, None, None, None, None)]}
    rows["B"] = [(2, 2, 2, 2, T0 - 600.0, None, None, None, None)]
    tenants_of = {(1,): {1}, (2,): {2}}
    name = threading.current_thread
    monkeypatch.setattr(closed_charge, "_fingerprints", lambda lo, hi: ((0, 0, 0), open_fp[name().name]))
    monkeypatch.setattr(closed_charge, "_rows_open_at", lambda cutoff: list(rows[name().name]))
    monkeypatch.setattr(
        closed_charge, "_built", lambda cutoff, floor: closed_charge.ClosedEntry(cutoff, floor)
    )

    seeding = threading.Thread(target=window_charge, args=(T0 - WINDOW_S, T0), name="seed")
    seeding.start()
    seeding.join()
    (key,) = closed_charge._local  # noqa: SLF001 - the shared copy under test
    shared = closed_charge._local[key]  # noqa: SLF001
    paused, a_done = threading.Event(), threading.Event()

    def store(self: Any, field: str, value: Any) -> None:
        if field == "open_fingerprint" and self is shared and name().name == "B":
            paused.set()  # B has stored its curves in the shared entry, not yet their fingerprint
            assert a_done.wait(10)
        object.__setattr__(self, field, value)

    monkeypatch.setattr(closed_charge.ClosedEntry, "__setattr__", store)
    b = threading.Thread(target=window_charge, args=(T0 - WINDOW_S, T0), name="B")
    b.start()
    while not paused.is_set() and b.is_alive():
        paused.wait(0.01)
    window_charge(T0 - WINDOW_S, T0)  # A, in this thread
    a_done.set()
    b.join(10)
    kept = closed_charge._local[key]  # noqa: SLF001
    assert kept.open_curves is not None
    assert set(kept.open_curves) == tenants_of[kept.open_fingerprint]


def test_the_shared_cache_is_written_when_the_closed_part_changes_not_the_open(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the entry holds every closed row (~180 KB on the benchmark's cluster), its open part a few
    # curves: a poll after a round (the open rows changed) kept storing the whole entry again
    w = world
    writes: list[str] = []
    real_set = closed_charge.cache.set
    monkeypatch.setattr(
        closed_charge.cache, "set", lambda key, *a, **k: writes.append(key) or real_set(key, *a, **k)
    )
    place(w, "A", 0, 100, 1000)  # closed at the cutoff of now = 3000
    b = place(w, "B", 1, 2000)  # open
    same(3000)
    assert len(writes) == 1  # built: the closed part is new
    b.active, b.ended_at = False, at(2950)
    b.save()  # the open part changes (B ended after the cutoff), the closed one does not
    place(w, "C", 2, 2900)
    same(3000)
    assert len(writes) == 1  # charged afresh here, nothing stored
    kept = closed_charge._local[writes[0]]  # noqa: SLF001 - this process's copy
    assert set(kept.open_curves or {}) == {w["tenants"][0].pk, w["tenants"][1].pk}
    same(3120)  # two steps later: B's end is now in the closed past, the entry advanced
    assert len(writes) == 2
