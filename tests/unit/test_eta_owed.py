"""The estimates' quota walk counts what each tenant is owed incrementally (``OwedTally``):
it must give exactly ``Quotas.owed`` of the jobs left, and the schedule exactly the one that
recomputes ``Quotas.owed`` from scratch after every start (``reference_schedule``, the walk as
it was written first), on random queues, GPU free times and quotas."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.eta import OwedTally, Queued, Quotas, next_round, schedule
from scheduling.core.types import TenantQuota

TENANTS = ("a", "b", "c", "z")  # "z" has no quota


def quotas_of(guaranteed: list[int], limits: list[int | None], borrow_s: float, starve_s: float) -> Quotas:
    return Quotas(
        {t: TenantQuota(g, b) for t, g, b in zip(TENANTS[:3], guaranteed, limits, strict=True)},
        borrow_bound_s=borrow_s,
        starvation_bound_s=starve_s,
    )


queued = st.builds(
    Queued,
    job_id=st.integers(0, 10**6),
    gpus=st.integers(1, 8),
    run_s=st.floats(1.0, 500.0),
    tenant=st.sampled_from(TENANTS),
    remaining_s=st.floats(0.0, 500.0),
    waiting_since=st.floats(-300.0, 0.0),
)
quota_sets = st.builds(
    quotas_of,
    st.lists(st.integers(0, 12), min_size=3, max_size=3),
    st.lists(st.one_of(st.none(), st.integers(0, 6)), min_size=3, max_size=3),
    st.floats(0.0, 300.0),
    st.floats(0.0, 600.0),
)
usage = st.dictionaries(st.sampled_from(TENANTS), st.integers(0, 16))


@settings(max_examples=300, deadline=None)
@given(st.lists(queued, max_size=40), quota_sets, usage, st.data())
def test_tally_is_owed_of_the_jobs_left(waiting: list[Queued], quotas: Quotas, in_use: dict, data) -> None:
    tally = OwedTally(quotas, waiting)
    assert tally.owed(in_use) == quotas.owed(waiting, in_use)
    i = -1
    while i + 1 < len(waiting):
        i = data.draw(st.integers(i + 1, len(waiting) - 1))
        in_use = data.draw(usage)
        tally.drop_through(i)
        assert tally.owed(in_use) == quotas.owed(waiting[i + 1 :], in_use)


def reference_schedule(
    queue: list[Queued],
    free_times: list[float],
    now: float,
    blocking: bool,
    round_interval_s: float | None,
    quotas: Quotas,
    usage: list[tuple[float, str, int]],
) -> dict[int, float] | None:
    """``scheduling.core.eta.schedule`` as first written: ``Quotas.owed`` of the rest of the queue
    recomputed from scratch after every start, and an event due only at or after its instant
    (``None`` where that walk came back to the same round for ever)."""
    waiting = list(queue)
    idle = sum(1 for t in free_times if t <= now)
    busy = [t for t in free_times if t > now]
    heapq.heapify(busy)
    in_use: dict[str, int] = {}
    releases = []
    for end, tenant, gpus in usage:
        in_use[tenant] = in_use.get(tenant, 0) + gpus
        releases.append((end, tenant, gpus))
    heapq.heapify(releases)
    starts: dict[int, float] = {}
    t = now
    while waiting:
        while busy and busy[0] <= t:
            heapq.heappop(busy)
            idle += 1
        while releases and releases[0][0] <= t:
            _, tenant, gpus = heapq.heappop(releases)
            in_use[tenant] -= gpus
        if idle >= min(q.gpus for q in waiting):
            left: list[Queued] = []
            owed = quotas.owed(waiting, in_use)
            for i, q in enumerate(waiting):
                if q.gpus > idle:
                    if blocking:
                        left.extend(waiting[i:])
                        break
                    left.append(q)
                elif quotas.allows(
                    q, in_use.get(q.tenant, 0), t, idle - q.gpus, sum(owed.values()) - owed.get(q.tenant, 0)
                ):
                    starts[q.job_id] = t
                    idle -= q.gpus
                    for _ in range(q.gpus):
                        heapq.heappush(busy, t + q.run_s)
                    in_use[q.tenant] = in_use.get(q.tenant, 0) + q.gpus
                    heapq.heappush(releases, (t + q.run_s, q.tenant, q.gpus))
                    owed = quotas.owed(waiting[i + 1 :], in_use)
                else:
                    left.append(q)
            waiting = left
            if not waiting:
                break
        upcoming = ([busy[0]] if busy else []) + ([releases[0][0]] if releases else [])
        if not upcoming:
            break
        upcoming += [c for c in (q.waiting_since + quotas.starvation_bound_s for q in waiting) if c > t]
        later = next_round(min(upcoming), now, round_interval_s)
        if later <= t:
            return None  # back to the same round with nothing changed: the first walk never ended
        t = later
    return starts


@settings(max_examples=300, deadline=None)
@given(
    st.lists(queued, max_size=40, unique_by=lambda q: q.job_id),
    st.lists(st.floats(-10.0, 400.0), min_size=1, max_size=24),
    quota_sets,
    st.booleans(),
    st.one_of(st.none(), st.floats(1.0, 60.0)),
    st.lists(st.tuples(st.floats(1.0, 400.0), st.sampled_from(TENANTS), st.integers(1, 8)), max_size=6),
)
def test_schedule_is_the_from_scratch_walk(
    queue: list[Queued],
    free: list[float],
    quotas: Quotas,
    blocking: bool,
    interval: float | None,
    held: list[tuple[float, str, int]],
) -> None:
    expected = reference_schedule(queue, free, 0.0, blocking, interval, quotas, held)
    found = schedule(queue, free, 0.0, blocking, interval, quotas, held)
    if expected is not None:
        assert found == expected
    # else: the first walk never ended; this one did (it returned)


def test_an_event_just_past_a_round_is_due_at_that_round() -> None:
    # Rounds every 10 s from 0; the only GPU frees at 10 s + 1 ns, within next_round's tolerance
    # of the round at 10 s: the job starts at 10 s. The walk used to wait for the GPU at the
    # round of 10 s for ever (the GPU was never "free by 10 s"): the round never ended.
    assert schedule([(1, 1, 5.0)], [10.0 + 1e-9], now=0.0, round_interval_s=10.0) == {1: 10.0}
    # likewise a release of quota usage 1 ns past a round: tenant a (cap 1) holds its GPU until
    # then, so its job starts at that round
    quotas = Quotas({"a": TenantQuota(1, 0)}, borrow_bound_s=0.0, starvation_bound_s=1e9)
    starts = schedule(
        [Queued(1, 1, 5.0, "a", 100.0)],
        [0.0],
        0.0,
        round_interval_s=10.0,
        quotas=quotas,
        usage=[(10.0 + 1e-9, "a", 1)],
    )
    assert starts == {1: 10.0}


def test_tally_by_hand() -> None:
    # a: guarantee 4, holds 1 → 3 unused; its waiting gangs 2, 2, 4: the two 2s fit → W = 4,
    # owed min(3, 4) = 3. b: guarantee 2, holds 2 → nothing fits, absent. After dropping the
    # first job: a's 2 and 4 → W = 2, owed 2.
    quotas = quotas_of([4, 2, 0], [None, None, None], 100.0, 1e9)
    waiting = [Queued(1, 2, 1.0, "a"), Queued(2, 1, 1.0, "b"), Queued(3, 2, 1.0, "a"), Queued(4, 4, 1.0, "a")]
    tally = OwedTally(quotas, waiting)
    assert tally.owed({"a": 1, "b": 2}) == {"a": 3}
    tally.drop_through(0)
    assert tally.owed({"a": 1, "b": 2}) == {"a": 2}
    tally.drop_through(3)
    assert tally.owed({}) == {}
