"""Quotas with borrowing, reclaim and the starvation bound (docs/FAIRNESS.md), on hand-computed
snapshots and the TESTING.md scenarios (borrowing on 8 GPUs, two 16-GPU gangs, unhealthy GPUs,
the starving 8-GPU job)."""

from __future__ import annotations

import pytest

from scheduling.core.placement import start_checker, unfit_reason
from scheduling.core.policies import POLICY_NAMES, get_policy
from scheduling.core.policies.sjf_bsbf_fair import aged_key, fair_order, starving_head
from scheduling.core.quota import gate_for, normalise
from scheduling.core.reclaim import borrowed_jobs, reclaim_preemptions
from scheduling.core.round_state import healthy_memory_desc
from scheduling.core.types import (
    GPU,
    Cluster,
    Job,
    Placement,
    RoundDecisions,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TenantQuota,
)
from scheduling.sim.engine import SimConfig, simulate
from tests.unit.fakes import FakeProfile, job

PLAIN = FakeProfile(memory={"m": (1000, 0)})
ALONE = FakeProfile(memory={"m": (40_000, 0)})  # 40,000 MB of 49,140: two jobs never share a GPU
EIGHT = Cluster.uniform(1, 8)


def running(j: Job, gpu_ids: tuple[int, ...], start: float = 0.0) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, j.batch_size, start))


def snap(
    pending: list[Job],
    run: list[RunningJob],
    quotas: dict,
    *,
    cluster: Cluster = EIGHT,
    now: float = 1000.0,
    **config: object,
) -> Snapshot:
    return Snapshot(now, cluster, tuple(pending), tuple(run), SchedulerConfig(**config), quotas)


def started(d: RoundDecisions) -> dict[int, tuple[int, ...]]:
    return {s.job_id: s.gpu_ids for s in d.starts}


def reasons(d: RoundDecisions) -> dict[int, str]:
    return {w.job_id: w.reason for w in d.waits}


# -- the contract -------------------------------------------------------------------------------------


def test_quota_values_are_checked() -> None:
    with pytest.raises(ValueError, match="≥ 0"):
        TenantQuota(-1)
    with pytest.raises(ValueError, match="≥ 0"):
        TenantQuota(2, -1)
    assert TenantQuota(4, 2).cap == 6
    assert TenantQuota(4).cap == float("inf")
    assert normalise({"a": 3, "b": TenantQuota(1, 0)}) == {"a": TenantQuota(3), "b": TenantQuota(1, 0)}
    with pytest.raises(ValueError, match="int or a TenantQuota"):
        normalise({"a": 2.5})  # type: ignore[dict-item]


def test_config_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="starvation_bound_s"):
        SchedulerConfig(starvation_bound_s=0)
    with pytest.raises(ValueError, match="reclaim"):
        SchedulerConfig(reclaim="kill")


def test_borrowed_jobs_are_the_latest_started_above_the_guarantee() -> None:
    # tenant a: guarantee 4; jobs of 2, 2, 2 GPUs started at 0, 10, 20 → 2+2 = 4 within, the third borrowed
    a1, a2, a3 = (job(i, gpus=2, tenant="a") for i in (1, 2, 3))
    run = [running(a1, (0, 1), 0.0), running(a3, (4, 5), 20.0), running(a2, (2, 3), 10.0)]
    assert [rj.job.id for rj in borrowed_jobs(run, {"a": TenantQuota(4)})] == [3]
    # a tenant without a quota borrows everything it holds
    assert [rj.job.id for rj in borrowed_jobs(run, {})] == [3, 2, 1]


# -- TESTING.md: 8 GPUs, A and B with quota 4 each, borrowing allowed --------------------------------


QUOTAS = {"a": TenantQuota(4), "b": TenantQuota(4)}


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_a_borrows_idle_gpus_nobody_is_waiting_for(name: str) -> None:
    own = job(1, gpus=4, tenant="a")
    extra = job(2, gpus=4, tenant="a", iterations=100)  # P = 100 s ≤ borrow bound 3,600 s
    d = get_policy(name).decide(snap([extra], [running(own, (0, 1, 2, 3))], QUOTAS), PLAIN)
    assert started(d) == {2: (4, 5, 6, 7)}


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_borrowing_never_takes_gpus_an_owner_is_waiting_for(name: str) -> None:
    # a holds 4 (its guarantee); a's short job would borrow the 4 idle GPUs, but b (guarantee 4,
    # holding 0) waits for 4: the idle GPUs are kept for b, whatever the order
    own = job(1, gpus=4, tenant="a")
    short = job(2, gpus=4, tenant="a", iterations=10)
    owner = job(3, gpus=4, tenant="b", iterations=1000, submit=5.0)
    d = get_policy(name).decide(snap([short, owner], [running(own, (0, 1, 2, 3))], QUOTAS), PLAIN)
    assert started(d)[3] == (4, 5, 6, 7)
    # a's job may only share job 1's GPUs, never b's (sjf-bsbf-fair serves b first, then a's job
    # shares: A = 10 s, B = 100 s, ξ 1.3 both; a ends first, T_con = 100/2 + (1 − 1/2.6) × 1.3 × 10
    # = 58 s < T_seq = 100 + 10/2 = 105 s)
    assert set(started(d).get(2, ())) <= {0, 1, 2, 3}
    if 2 not in started(d) and d.waits:
        assert "other tenants' waiting jobs are owed 4 GPUs" in reasons(d)[2]


@pytest.mark.parametrize(
    ("b_holds", "idle_after", "owed", "left"),
    [(3, 0, "1 GPU", "no GPU"), (2, 1, "2 GPUs", "1 GPU"), (0, 3, "4 GPUs", "3 GPUs")],
)
def test_the_owed_refusal_says_what_its_number_is(
    b_holds: int, idle_after: int, owed: str, left: str
) -> None:
    # "but 1 idle GPUs are kept for other tenants' waiting jobs" was said with no GPU idle: the
    # number is what b's waiting job is owed within its guarantee, and "1 GPUs" was wrong too
    own = job(1, gpus=4, tenant="a")
    b_run = [running(job(9, gpus=b_holds, tenant="b"), tuple(range(4, 4 + b_holds)))] if b_holds else []
    owner = job(3, gpus=4 - b_holds, tenant="b")
    borrower = job(2, gpus=1, tenant="a", iterations=10)
    gate = gate_for(snap([borrower, owner], [running(own, (0, 1, 2, 3)), *b_run], QUOTAS))
    assert gate is not None
    assert gate.refusal(borrower, idle_after) == (
        f"would borrow 1 GPU beyond tenant a's guarantee of 4, but other tenants' waiting jobs are"
        f" owed {owed} within their guarantees and starting it would leave {left} idle"
    )


@pytest.mark.parametrize("name", ["fifo", "sjf", "srtf", "tiresias", "sjf-ffs", "sjf-bsbf"])
def test_policies_that_do_not_reclaim_borrow_only_within_the_bound(name: str) -> None:
    own = job(1, gpus=4, tenant="a")
    long = job(2, gpus=4, tenant="a", iterations=5000)  # P = 5,000 s > 3,600 s
    d = get_policy(name).decide(snap([long], [running(own, (0, 1, 2, 3))], QUOTAS), PLAIN)
    assert d.starts == ()
    assert "borrow bound of 3600 s" in reasons(d)[2]


@pytest.mark.parametrize("name", ["fifo", "sjf", "srtf", "tiresias", "sjf-ffs", "sjf-bsbf"])
def test_a_job_past_the_starvation_bound_may_borrow_beyond_the_borrow_bound(name: str) -> None:
    # same long job (P = 5,000 s), but submitted at 0 and now = 1,000 ≥ starvation bound 900 s:
    # it would otherwise never start (liveness), so it borrows
    own = job(1, gpus=4, tenant="a")
    long = job(2, gpus=4, tenant="a", iterations=5000, submit=0.0)
    s = snap([long], [running(own, (0, 1, 2, 3))], QUOTAS, starvation_bound_s=900.0)
    assert started(get_policy(name).decide(s, PLAIN)) == {2: (4, 5, 6, 7)}


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_cap_is_guarantee_plus_borrow_limit(name: str) -> None:
    own = job(1, gpus=4, tenant="a")
    extra = job(2, gpus=4, tenant="a", iterations=10)
    capped = {"a": TenantQuota(4, 2), "b": TenantQuota(4)}  # a may hold 6 < 4 + 4
    d = get_policy(name).decide(snap([extra], [running(own, (0, 1, 2, 3))], capped), PLAIN)
    assert d.starts == ()
    assert "above its quota cap of 6" in reasons(d)[2]


def test_fair_policy_reclaims_borrowed_gpus_by_preemption() -> None:
    # a holds 8: job 1 (4 GPUs, started at 0, its guarantee) and job 2 (4 GPUs, started at 100,
    # borrowed). b submits 4 GPUs within its guarantee → job 2 is preempted, b starts on its GPUs.
    own, borrowed = job(1, gpus=4, tenant="a"), job(2, gpus=4, tenant="a")
    owner = job(3, gpus=4, tenant="b", submit=900.0)
    s = snap([owner], [running(own, (0, 1, 2, 3), 0.0), running(borrowed, (4, 5, 6, 7), 100.0)], QUOTAS)
    d = get_policy("sjf-bsbf-fair").decide(s, ALONE)
    assert [p.job_id for p in d.preemptions] == [2]
    assert started(d) == {3: (4, 5, 6, 7)}
    # reclaim mode "bound" never preempts: b waits for the borrowed job to end
    s_bound = snap([owner], list(s.running), QUOTAS, reclaim="bound")
    d_bound = get_policy("sjf-bsbf-fair").decide(s_bound, ALONE)
    assert d_bound.preemptions == () and d_bound.starts == ()


def test_reclaim_preempts_nothing_that_would_not_let_the_owner_start() -> None:
    # b wants 8 GPUs but its guarantee is 4: not an owner's claim → no preemption
    own, borrowed = job(1, gpus=4, tenant="a"), job(2, gpus=4, tenant="a")
    big = job(3, gpus=8, tenant="b")
    s = snap([big], [running(own, (0, 1, 2, 3), 0.0), running(borrowed, (4, 5, 6, 7), 100.0)], QUOTAS)
    assert reclaim_preemptions(s, [big], "p") == ((), ())


def test_reclaim_preempts_the_borrowed_job_with_the_most_remaining_time() -> None:
    # a (guarantee 4) holds 8 GPUs in start order: job 1 and job 2 (2 GPUs each, its guarantee),
    # job 3 (2 GPUs, started at 100, P = 10,000 s) and job 4 (2 GPUs, started at 200, P = 50 s),
    # both borrowed. b's job (2 GPUs, within its guarantee 4) needs 2: job 3, with the most left,
    # is preempted, not job 4, the latest started, which is about to finish
    a = [
        job(1, gpus=2, tenant="a"),
        job(2, gpus=2, tenant="a"),
        job(3, gpus=2, tenant="a", iterations=10_000),
        job(4, gpus=2, tenant="a", iterations=50),
    ]
    run = [
        running(a[0], (0, 1), 0.0),
        running(a[1], (2, 3), 50.0),
        running(a[2], (4, 5), 100.0),
        running(a[3], (6, 7), 200.0),
    ]
    owner = job(5, gpus=2, tenant="b", submit=900.0)
    s = snap([owner], run, QUOTAS)
    preempt, claimed = reclaim_preemptions(s, [owner], "p")
    assert [p.job_id for p in preempt] == [3] and claimed == (5,)
    d = get_policy("sjf-bsbf-fair").decide(s, ALONE)
    assert [p.job_id for p in d.preemptions] == [3] and started(d) == {5: (4, 5)}


def borrowing_trace() -> list[Job]:
    # A: job 1 (4 GPUs, 1,000 s) and job 2 (4 GPUs, 600 s) at t=0; B: job 3 (4 GPUs, 500 s) at t=100
    return [
        job(1, gpus=4, tenant="a", iterations=1000),
        job(2, gpus=4, tenant="a", iterations=600),
        job(3, gpus=4, tenant="b", iterations=500, submit=100.0),
    ]


def test_sim_bound_reclaim_b_starts_when_the_borrowed_job_ends() -> None:
    # sjf-bsbf with quotas (no preemption, P = 600 s ≤ 3,600 s lets job 2 borrow): job 2 starts at 0
    # and ends at 600; b's job starts then (its wait 600 − 100 = 500 s is visible) and ends at 1,100.
    config = SimConfig(round_on_events=True, tenant_quotas=QUOTAS)
    result = simulate(borrowing_trace(), EIGHT, get_policy("sjf-bsbf"), ALONE, config)
    by_id = {o.job_id: o for o in result.outcomes}
    assert by_id[3].first_start == 600.0 and by_id[3].queue_s == 500.0 and by_id[3].end_time == 1100.0
    assert max(busy for _, busy, _ in result.timeline) <= 8


def test_sim_preempt_reclaim_b_starts_at_once_and_a_pays_the_restart() -> None:
    # sjf-bsbf-fair: at t=100 job 2 (borrowed, started 0, 100 of 600 s done) is preempted and b starts
    # (ends at 600). Job 2 restarts at 600 when GPUs free up (SJF: it is shorter than nothing else
    # waiting), pays the 30 s restart cost and its 500 remaining s: ends at 600 + 30 + 500 = 1,130.
    config = SimConfig(round_on_events=True, tenant_quotas=QUOTAS, restart_cost_s=30.0)
    result = simulate(borrowing_trace(), EIGHT, get_policy("sjf-bsbf-fair"), ALONE, config)
    by_id = {o.job_id: o for o in result.outcomes}
    assert by_id[3].first_start == 100.0 and by_id[3].queue_s == 0.0
    assert by_id[2].preemptions == 1 and by_id[2].end_time == pytest.approx(1130.0)
    assert max(busy for _, busy, _ in result.timeline) <= 8


# -- other TESTING.md scenarios, with quotas ---------------------------------------------------------


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_two_16_gpu_gangs_exactly_one_runs(name: str) -> None:
    cluster = Cluster.uniform(2, 8)
    a, b = job(1, gpus=16, tenant="a"), job(2, gpus=16, tenant="b")
    d = get_policy(name).decide(snap([a, b], [], {"a": 8, "b": 8}, cluster=cluster), ALONE)
    assert len(d.starts) == 1 and len(d.starts[0].gpu_ids) == 16
    assert {1, 2} - set(started(d)) == {2}  # SJF/FIFO tie-break by id: job 1 runs, job 2 holds nothing


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_unhealthy_gpus_six_gpu_job_runs_two_gpu_job_waits(name: str) -> None:
    gpus = tuple(GPU(i, "node-00", i, 49_140, healthy=i < 6) for i in range(8))
    six, two = job(1, gpus=6, tenant="a"), job(2, gpus=2, tenant="b", submit=1.0)
    # a's 6 GPUs are within its guarantee; b's 2-GPU job is too, but no healthy GPU is left
    d = get_policy(name).decide(snap([six, two], [], {"a": 6, "b": 2}, cluster=Cluster(gpus)), ALONE)
    assert started(d) == {1: (0, 1, 2, 3, 4, 5)}


# -- starvation bound: an 8-GPU job while a 1-GPU job arrives every 30 s ------------------------------


def starving_trace() -> list[Job]:
    # job 0: 8 GPUs, 1,000 s, at t=0; then 1-GPU jobs of 240 s every 30 s from t=0 to 6,000 s
    small = [job(i, gpus=1, iterations=240, submit=30.0 * (i - 1)) for i in range(1, 202)]
    return [job(0, gpus=8, iterations=1000, submit=1.0), *small]


def test_sim_starving_job_starts_within_the_bound() -> None:
    # 8 GPUs, no sharing (40,000 MB each). Offered load 240/30 = 8 GPUs: SJF keeps all 8 busy with
    # 1-GPU jobs, so under sjf-bsbf the 8-GPU job starts only after arrivals stop (t ≥ 6,000 s).
    # sjf-bsbf-fair with a 1,800 s bound: from the first round with wait ≥ 1,800 s (t ≤ 1,801 + 60) the
    # job reserves the GPUs; the 1-GPU jobs running then end within 240 s, and the next round
    # (≤ 60 s later) starts it: start ≤ 1 + 1,800 + 60 + 240 + 60 = 2,161 s.
    trace = starving_trace()
    plain = simulate(trace, EIGHT, get_policy("sjf-bsbf"), ALONE, SimConfig())
    assert {o.job_id: o for o in plain.outcomes}[0].first_start >= 6000.0
    config = SimConfig(scheduler=SchedulerConfig(starvation_bound_s=1800.0))
    fair = simulate(trace, EIGHT, get_policy("sjf-bsbf-fair"), ALONE, config)
    big = {o.job_id: o for o in fair.outcomes}[0]
    assert 1801.0 <= big.first_start <= 2161.0
    assert not fair.unfinished and fair.preemptions == 0  # no quotas: it never preempts


def test_fair_order_starving_head_first_then_aged_sjf() -> None:
    # now = 10,000 s, bound 3,600 s, aging 3,600 s
    old = job(1, iterations=9000, submit=0.0)  # waited 10,000 s ≥ bound, the longest: the head
    long_wait = job(2, iterations=3000, submit=6400.0)  # waited 3,600: key 3,000/(1+1) = 1,500
    fresh = job(3, iterations=2000, submit=10_000.0)  # waited 0: key 2,000
    # also past the bound (5,000 s), but not the head: keeps its aged place,
    # key 50,000/(1 + 5,000/3,600) = 20,930 s — behind the fresh job
    old_long = job(5, iterations=50_000, submit=5000.0)
    s = snap(
        [fresh, long_wait, old_long, old], [], {}, now=10_000.0, starvation_bound_s=3600.0, aging_s=3600.0
    )
    assert aged_key(long_wait, 10_000.0, 3600.0) == 1500.0
    assert round(aged_key(old_long, 10_000.0, 3600.0)) == 20_930
    head = starving_head(s, lambda _job: True)
    assert head is old
    assert [j.id for j in fair_order(s, head)] == [1, 2, 3, 5]
    assert [j.id for j in fair_order(s)] == [2, 3, 1, 5]  # no head: aged order only (key 9,000/3.78)


def test_starving_head_skips_jobs_that_cannot_start_now() -> None:
    # all four waited past the bound (now 10,000, bound 3,600); oldest first: job 1 needs 16 GPUs of 8,
    # job 2 needs 60,000 MB on GPUs of 49,140 MB at every sub-batch, job 3 would take tenant a to
    # 4 GPUs above its cap of 0 + 2; job 4 can start: it is the head and holds the reservation
    profile = FakeProfile(memory={"m": (40_000, 0), "huge": (60_000, 0)})  # no two jobs share a GPU
    pending = [
        job(1, gpus=16, submit=0.0),
        job(2, model="huge", submit=100.0),
        job(3, gpus=4, tenant="a", submit=200.0),
        job(4, gpus=2, tenant="b", submit=300.0),
    ]
    busy = running(job(9, gpus=8, tenant="c", iterations=100_000), tuple(range(8)))
    quotas = {"a": TenantQuota(0, 2), "b": TenantQuota(0), "c": TenantQuota(8)}
    s = snap(pending, [busy], quotas, now=10_000.0, starvation_bound_s=3600.0)
    can_start = start_checker(s, profile)
    assert starving_head(s, can_start).id == 4
    d = get_policy("sjf-bsbf-fair").decide(s, profile)
    assert d.starts == () and "reserved for starving job 4" in reasons(d)[3]
    assert "only 8 healthy GPUs" in reasons(d)[1]
    # no job past the bound: no head
    assert (
        starving_head(snap(pending, [busy], quotas, now=10_000.0, starvation_bound_s=20_000.0), can_start)
        is None
    )


def test_reservation_holds_back_later_jobs_but_not_owners_within_guarantee() -> None:
    # 8 GPUs, 0–3 busy with tenant c's job until t = 1,000 + 10,000 = 11,000 s. Job 1 (8 GPUs, tenant
    # a) has waited past the bound. Order: job 3 (b, within its guarantee 2) first → starts on one idle
    # GPU (ends at 1,010 s). Job 1 cannot start: it reserves; shadow time: it needs 8 − 3 idle = 5
    # more GPUs, the 5th to free is at 11,000 s; spare then 3 + 5 − 8 = 0. Job 4 (a, P = 10 s) ends
    # at 1,010 ≤ 11,000: backfilled on an idle GPU. Job 2 (a, P = 20,000 s) would end at 21,000 >
    # 11,000 with no spare GPU: it waits.
    busy = running(job(9, gpus=4, tenant="c", iterations=10_000), (0, 1, 2, 3))
    starving = job(1, gpus=8, tenant="a", submit=0.0)
    long_a = job(2, gpus=1, tenant="a", iterations=20_000, submit=990.0)
    small_b = job(3, gpus=1, tenant="b", iterations=10, submit=990.0)
    short_a = job(4, gpus=1, tenant="a", iterations=10, submit=990.0)
    quotas = {"a": 0, "b": 2, "c": 6}
    pending = [starving, long_a, small_b, short_a]
    s = snap(pending, [busy], quotas, starvation_bound_s=500.0)
    d = get_policy("sjf-bsbf-fair").decide(s, ALONE)
    assert set(started(d)) == {3, 4}
    assert "reserved for starving job 1" in reasons(d)[2] and "t=11000" in reasons(d)[2]
    # without quotas the same: job 3 and 4 both end before the shadow time, job 2 does not
    d_free = get_policy("sjf-bsbf-fair").decide(snap(pending, [busy], {}, starvation_bound_s=500.0), ALONE)
    assert set(started(d_free)) == {3, 4}


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_an_owner_job_that_can_never_start_keeps_no_gpus_idle(name: str) -> None:
    # 8 GPUs of 49,140 MB; a holds its guarantee 4 and has a short job (P = 100 s) that would
    # borrow the 4 idle GPUs; b (guarantee 4, holding 0) waits with a 4-GPU job of 60,000 MB per GPU
    # at every sub-batch: it can never start, so b is owed nothing and a's job borrows
    profile = FakeProfile(memory={"m": (1000, 0), "huge": (60_000, 0)})
    own = job(1, gpus=4, tenant="a")
    short = job(2, gpus=4, tenant="a", iterations=100)
    never = job(3, gpus=4, tenant="b", model="huge")
    d = get_policy(name).decide(snap([short, never], [running(own, (0, 1, 2, 3))], QUOTAS), profile)
    assert started(d) == {2: (4, 5, 6, 7)} and not d.preemptions
    assert "more memory per GPU than the largest healthy GPU (49140 MB)" in reasons(d)[3]


def test_a_gang_needs_its_memory_on_its_smallest_gpu() -> None:
    # GPUs of 80,000, 80,000, 40,000, 40,000 MB: a 2-GPU job of 60,000 MB per GPU fits GPUs 0-1;
    # a 3-GPU one would need a third GPU of ≥ 60,000 MB: it can never start
    gpus = tuple(GPU(i, "node-00", i, 80_000 if i < 2 else 40_000) for i in range(4))
    s = snap([], [], {}, cluster=Cluster(gpus))
    memory = healthy_memory_desc(s)
    assert memory == [80_000, 80_000, 40_000, 40_000]
    profile = FakeProfile(memory={"big": (60_000, 0)})
    assert unfit_reason(job(1, gpus=2, model="big"), memory, profile, 1) is None
    reason = unfit_reason(job(2, gpus=3, model="big"), memory, profile, 1)
    assert reason == (
        "needs more memory per GPU than the 3 largest healthy GPUs together (the smallest "
        "of them) (40000 MB) at every sub-batch down to 1"
    )


@pytest.mark.parametrize("skip", [True, False])
def test_sim_an_idle_cluster_waits_for_the_starvation_bound_to_waive_the_borrow_bound(skip: bool) -> None:
    # 4 idle GPUs, a guaranteed all 4 but absent; b (no guarantee) submits job 1 at 0: 2 GPUs,
    # P = 1,000 s > borrow bound 200 s, so sjf (cannot preempt) refuses it until it has waited the
    # starvation bound, 600 s: it starts in the round at 600 s (10 × 60) and ends at 1,600 s. The
    # simulation must not stop at t=0 because the cluster is idle and the first round did nothing.
    config = SimConfig(
        scheduler=SchedulerConfig(starvation_bound_s=600.0, borrow_bound_s=200.0),
        tenant_quotas={"a": TenantQuota(4)},
        skip_idle_rounds=skip,
    )
    result = simulate(
        [job(1, gpus=2, tenant="b", iterations=1000)], Cluster.uniform(1, 4), get_policy("sjf"), PLAIN, config
    )
    assert result.unfinished == ()
    assert [(o.first_start, o.end_time) for o in result.outcomes] == [(600.0, 1600.0)]
