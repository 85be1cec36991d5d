"""Estimated start times (scheduling.core.eta): every expected number is worked out by hand from
the free times of the GPUs and the run times of the waiting jobs."""

from __future__ import annotations

import pytest

from scheduling.core.eta import (
    EstimateMode,
    Queued,
    Quotas,
    estimate_mode,
    estimated_starts,
    gpu_free_times,
    next_round,
    schedule,
)
from scheduling.core.policies import get_policy
from scheduling.core.types import (
    Cluster,
    Job,
    Placement,
    Preempt,
    RoundDecisions,
    RunningJob,
    Snapshot,
    Start,
    TenantQuota,
)
from tests.unit.fakes import FakeProfile


def job(
    jid: int, gpus: int, iterations: int, iter_s: float = 1.0, done: float = 0.0, model: str = "m"
) -> Job:
    return Job(jid, "t", model, 32, gpus, iterations, 0.0, iter_s, iterations_done=done)


def test_only_non_preemptive_policies_give_estimates() -> None:
    assert estimate_mode(get_policy("sjf-bsbf")) == EstimateMode(blocking=False)
    assert estimate_mode(get_policy("sjf")) == EstimateMode(blocking=False)
    assert estimate_mode(get_policy("fifo")) == EstimateMode(blocking=True)
    for name in ("srtf", "tiresias", "sjf-bsbf-fair"):
        assert estimate_mode(get_policy(name)) is None


def test_schedule_starts_jobs_in_order_as_gpus_free() -> None:
    # 4 GPUs: 1 idle now (t=0), the others free at 10, 20, 30 s.
    # job 1 (2 GPUs, 100 s): at 10 s two are idle -> starts at 10, holds them until 110.
    # job 2 (1 GPU, 5 s): at 0 s one is idle, but job 1 comes first and does not fit; not blocking,
    #   so job 2 starts at 0 on the idle GPU (until 5); at 5 that GPU is idle again.
    #   job 1 takes the GPUs idle at 10 s: the one freed at 5 and the one freed at 10.
    # job 3 (2 GPUs, 1 s): one GPU idle at 20 s, two at 30 s -> 30.
    queue = [(1, 2, 100.0), (2, 1, 5.0), (3, 2, 1.0)]
    assert schedule(queue, [0.0, 10.0, 20.0, 30.0], now=0.0) == {2: 0.0, 1: 10.0, 3: 30.0}


def test_strict_order_blocks_behind_the_head() -> None:
    # FIFO: job 2 may not pass job 1; job 1 starts at 10 (GPUs of 0 and 10), job 2 at 20.
    queue = [(1, 2, 100.0), (2, 1, 5.0)]
    assert schedule(queue, [0.0, 10.0, 20.0], now=0.0, blocking=True) == {1: 10.0, 2: 20.0}


def test_starts_wait_for_the_next_round() -> None:
    # Rounds every 60 s from now=100: a GPU freed at 130 is used at the round of 160.
    assert next_round(130.0, 100.0, 60.0) == 160.0
    assert next_round(160.0, 100.0, 60.0) == 160.0
    assert next_round(130.0, 100.0, None) == 130.0
    assert schedule([(1, 1, 10.0)], [130.0], now=100.0, round_interval_s=60.0) == {1: 160.0}


def test_a_gang_larger_than_what_ever_frees_gets_no_estimate() -> None:
    assert schedule([(1, 3, 10.0)], [0.0, 5.0], now=0.0) == {}


def test_free_times_count_remaining_work_and_the_sharing_slowdown() -> None:
    # 2 GPUs. Job 1 on GPU 0: 100 iterations, 40 done, 2 s each alone -> ends at 60 * 2 = 120 s.
    # A start this round puts job 2 (10 iterations of 1 s) on GPU 0 too, at ξ = 1.5 for both:
    # job 1 then ends at 60 * 2 * 1.5 = 180 s, job 2 at 10 * 1 * 1.5 = 15 s; GPU 0 is free of both at
    # 180 s, GPU 1 (idle) now.
    profile = FakeProfile(slowdowns={("a", "b"): (1.5, 1.5)})
    one = job(1, 1, 100, 2.0, done=40, model="a")
    two = job(2, 1, 10, 1.0, model="b")
    snap = Snapshot(0.0, Cluster.uniform(1, 2), (two,), (RunningJob(one, Placement(1, (0,), 32, 0.0)),))
    decisions = RoundDecisions("x", 0.0, starts=(Start(2, (0,), 32, 1),))
    assert sorted(gpu_free_times(snap, decisions, profile)) == [0.0, 180.0]
    # Preempted, job 1 frees GPU 0 at once.
    preempting = RoundDecisions("x", 0.0, preemptions=(Preempt(1, "r"),))
    assert sorted(gpu_free_times(snap, preempting, profile)) == [0.0, 0.0]


def test_estimated_starts_follow_the_given_order_and_skip_started_jobs() -> None:
    # 2 GPUs, both busy with job 1 (2 GPUs, 50 iterations of 1 s) until 50 s.
    # Waiting: job 3 (2 GPUs, 30 s) then job 4 (1 GPU, 10 s), in that order; job 5 started this round.
    profile = FakeProfile()
    running = RunningJob(job(1, 2, 50), Placement(1, (0, 1), 32, 0.0))
    waiting = (job(3, 2, 30), job(4, 1, 10), job(5, 1, 10))
    snap = Snapshot(0.0, Cluster.uniform(1, 2), waiting, (running,))
    decisions = RoundDecisions("x", 0.0)
    # job 3 at 50 (holds both until 80), job 4 at 80
    assert estimated_starts(snap, decisions, profile, [3, 4]) == {3: 50.0, 4: 80.0}
    # the other order: job 4 at 50 on one GPU; job 3 needs both: at 60
    assert estimated_starts(snap, decisions, profile, [4, 3]) == {4: 50.0, 3: 60.0}
    # an unknown id, a job larger than the cluster and a repeated id get nothing; ``limit`` bounds
    # the jobs estimated
    snap2 = Snapshot(0.0, Cluster.uniform(1, 2), (*waiting, job(6, 3, 10)), (running,))
    assert estimated_starts(snap2, decisions, profile, [99, 6, 4, 4, 3], limit=1) == {4: 50.0}
    # a job the round starts is not estimated: job 4 holds GPU 0 until 10 s, job 3 needs both -> 10
    idle = Snapshot(0.0, Cluster.uniform(1, 2), (job(4, 1, 10), job(3, 2, 30)), ())
    starting = RoundDecisions("x", 0.0, starts=(Start(4, (0,), 32, 1),))
    assert estimated_starts(idle, starting, profile, [4, 3]) == {3: 10.0}


def test_estimates_on_a_real_round() -> None:
    # SJF on 1 x 2 GPUs: job 1 (2 GPUs, 100 s exclusive) runs; job 2 (1 GPU, 10 s) and job 3 (2 GPUs,
    # 20 s) wait. SJF order: job 2 (P=10) then job 3 (P=20). Both GPUs free at 100: job 2 starts
    # there (until 110), job 3 needs both -> 110.
    profile = FakeProfile()
    running = RunningJob(job(1, 2, 100), Placement(1, (0, 1), 32, 0.0))
    snap = Snapshot(0.0, Cluster.uniform(1, 2), (job(3, 2, 20), job(2, 1, 10)), (running,))
    policy = get_policy("sjf")
    decisions = policy.decide(snap, profile, explain=True)
    order = [w.job_id for w in decisions.waits]
    assert order == [2, 3]
    mode = estimate_mode(policy)
    assert mode is not None
    assert estimated_starts(snap, decisions, profile, order, mode) == {2: 100.0, 3: 110.0}
    assert estimated_starts(snap, decisions, profile, order, mode, round_interval_s=60.0) == {
        2: 120.0,
        3: 180.0,
    }


def test_quotas_cap_and_bound_borrowing() -> None:
    # 2 GPUs busy until 10 s with tenant b's 2-GPU job; a and b are guaranteed 1 GPU each, borrowing
    # is bounded by 100 s. At 10 s: job 1 (a) is within a's guarantee -> 10; job 2 (a) would borrow
    # with P = 500 s > 100 s: refused (without blocking), until job 1 ends at 510 s; job 3 (b) is
    # within b's guarantee -> 10.
    quotas = Quotas({"a": TenantQuota(1), "b": TenantQuota(1)}, borrow_bound_s=100.0, starvation_bound_s=1e9)
    queue = [Queued(1, 1, 500.0, "a", 500.0), Queued(2, 1, 500.0, "a", 500.0), Queued(3, 1, 50.0, "b", 50.0)]
    starts = schedule(queue, [10.0, 10.0], 0.0, quotas=quotas, usage=[(10.0, "b", 2)])
    assert starts == {1: 10.0, 3: 10.0, 2: 510.0}
    # ... unless job 2 has waited the starvation bound (200 s) by then: at 60 s, when job 3 ends
    starving = Quotas(quotas.quotas, borrow_bound_s=100.0, starvation_bound_s=200.0)
    queue[1] = Queued(2, 1, 500.0, "a", 500.0, waiting_since=-150.0)
    assert schedule(queue, [10.0, 10.0], 0.0, quotas=starving, usage=[(10.0, "b", 2)])[2] == 60.0


def test_owners_first() -> None:
    # 2 idle GPUs. Job A of tenant a (no guarantee, 2 GPUs, P = 10 s) would borrow both, leaving
    # none for tenant b's waiting job B, within b's guarantee of 1: refused. B starts at 0 (until 30);
    # at 30 s nothing is owed any more and A borrows both.
    quotas = Quotas({"a": TenantQuota(0), "b": TenantQuota(1)}, borrow_bound_s=100.0, starvation_bound_s=1e9)
    queue = [Queued(1, 2, 10.0, "a", 10.0), Queued(2, 1, 30.0, "b", 30.0)]
    assert schedule(queue, [0.0, 0.0], 0.0, quotas=quotas) == {2: 0.0, 1: 30.0}


@pytest.mark.parametrize("free", [[], [0.0]])
def test_empty_queue(free: list[float]) -> None:
    assert schedule([], free, now=0.0) == {}
