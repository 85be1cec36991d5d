"""Review of sjf-bsbf-fair's starving head, reclaim victim order and idle-round skipping
(commit 93ceefe). Expected values are worked out by hand in the comments; the first four
exposed bugs fixed in the next commit (a useless reclaim victim, reclaim for an owner's job that
can never start, a head that fits no set of GPUs, skipped rounds when the borrow bound is waived)."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from scheduling.core.policies import get_policy
from scheduling.core.reclaim import reclaim_preemptions
from scheduling.core.types import (
    GPU,
    Cluster,
    Placement,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TenantQuota,
)
from scheduling.sim.engine import SimConfig, simulate
from tests.unit.fakes import FakeProfile, job


def running(j, gpu_ids: tuple[int, ...], start: float) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, 32, start))


def test_reclaim_preempts_no_victim_that_frees_no_gpu() -> None:
    # 8 GPUs; a (guarantee 4) runs job 1 alone on GPUs 0-3 at first; c (guarantee 0) borrows job 2
    # (1 GPU, P = 100,000 s, sharing GPU 0 with job 1) and job 3 (4 GPUs 4-7, P = 5,000 s).
    # b (guarantee 4) waits with job 4 (4 GPUs). Preempting job 2 frees nothing (job 1 stays on
    # GPU 0); preempting job 3 frees GPUs 4-7 = 4 ≥ 4. Only job 3 should be preempted.
    quotas = {"a": TenantQuota(4), "b": TenantQuota(4), "c": TenantQuota(0)}
    a1 = job(1, gpus=4, tenant="a", iterations=1000)
    c1 = job(2, gpus=1, tenant="c", iterations=100_000)
    c2 = job(3, gpus=4, tenant="c", iterations=5000)
    owner = job(4, gpus=4, tenant="b", submit=100.0)
    s = Snapshot(
        100.0,
        Cluster.uniform(1, 8),
        (owner,),
        (running(a1, (0, 1, 2, 3), 0.0), running(c1, (0,), 10.0), running(c2, (4, 5, 6, 7), 20.0)),
        SchedulerConfig(),
        quotas,
    )
    preempt, claimed = reclaim_preemptions(s, [owner], "p")
    assert claimed == (4,)
    assert [p.job_id for p in preempt] == [3]


def test_no_reclaim_for_an_owner_job_that_can_never_start() -> None:
    # 4 GPUs of 49,140 MB. a (guarantee 0) borrows all 4 with job 1 (1,000 s) at t=0. At t=100
    # b (guarantee 2) submits job 2: 2 GPUs × 60,000 MB at every sub-batch — it can never start.
    # Preempting job 1 cannot help job 2, so job 1 should run on and finish at 1,000 s; job 3
    # (a, 2 GPUs, 100 s, t=200) may start whenever GPUs allow. Only job 2 stays unfinished.
    profile = FakeProfile(memory={"m": (10_000, 0), "huge": (60_000, 0)})
    quotas = {"a": TenantQuota(0), "b": TenantQuota(2)}
    jobs = [
        job(1, gpus=4, tenant="a", iterations=1000),
        job(2, gpus=2, tenant="b", model="huge", submit=100.0),
        job(3, gpus=2, tenant="a", iterations=100, submit=200.0),
    ]
    config = SimConfig(scheduler=SchedulerConfig(reclaim="preempt"), tenant_quotas=quotas)
    result = simulate(jobs, Cluster.uniform(1, 4), get_policy("sjf-bsbf-fair"), profile, config)
    assert result.unfinished == (2,)
    assert result.preemptions == 0


def test_a_head_that_fits_no_set_of_gpus_does_not_hold_the_reservation() -> None:
    # one node: GPU 0 has 80,000 MB, GPUs 1-3 40,000 MB. Job 1 (2 GPUs × 60,000 MB) needs two GPUs
    # of ≥ 60,000 MB: only one exists, so it can never start. Job 2 (4 GPUs, 10,000 MB, 100 s) waits
    # 1,000 s at t=5,000. Bound 3,600 s: both are past it. If job 1 is the head the reservation on an
    # idle cluster has shadow = now and spare = 4 − 2 = 2 < 4, so job 2 is held back forever.
    # Expected: job 1 is not a head that can start; job 2 starts on GPUs 0-3.
    profile = FakeProfile(memory={"m": (10_000, 0), "big": (60_000, 0)})
    cluster = Cluster(tuple(GPU(i, "node-00", i, 80_000 if i == 0 else 40_000) for i in range(4)))
    pending = (job(1, gpus=2, model="big"), job(2, gpus=4, iterations=100, submit=4000.0))
    s = Snapshot(5000.0, cluster, pending, (), SchedulerConfig(starvation_bound_s=3600.0))
    d = get_policy("sjf-bsbf-fair").decide(s, profile)
    assert [(st.job_id, st.gpu_ids) for st in d.starts] == [(2, (0, 1, 2, 3))]


@pytest.mark.parametrize("name", ["sjf-bsbf-fair", "sjf-bsbf"])
def test_skipping_is_exact_when_the_borrow_bound_is_waived_by_waiting(name: str) -> None:
    # 4 GPUs; b (guarantee 4) runs job 1 (2 GPUs, 5,000 s) from t=0; a (no guarantee) waits with
    # job 2 (2 GPUs, P = 10,000 s > borrow bound 200 s): refused until it has waited 600 s (the
    # starvation bound), then b owes nothing (no b job waits) and 2 GPUs are idle: without
    # skipping it starts in the round at t=600 (10 × 60 s). Skipping must give the same.
    quotas = {"a": TenantQuota(0), "b": TenantQuota(4)}
    jobs = [job(1, gpus=2, tenant="b", iterations=5000), job(2, gpus=2, tenant="a", iterations=10_000)]
    scheduler = SchedulerConfig(starvation_bound_s=600.0, reclaim="both", borrow_bound_s=200.0)
    config = SimConfig(scheduler=scheduler, tenant_quotas=quotas)
    cluster = Cluster.uniform(1, 4)
    slow = simulate(jobs, cluster, get_policy(name), FakeProfile(), replace(config, skip_idle_rounds=False))
    assert {o.job_id: o.first_start for o in slow.outcomes} == {1: 0.0, 2: 600.0}
    fast = simulate(jobs, cluster, get_policy(name), FakeProfile(), config)
    assert fast.outcomes == slow.outcomes


def test_skipping_is_exact_when_the_head_appears_with_time_only() -> None:
    # 4 GPUs, 30,000 MB per job: two jobs never share a 49,140 MB GPU. Job 1 (3 GPUs, 1,000 s) runs
    # from 0; job 2 (4 GPUs, 500 s, t=10) waits; at t=400 job 3 (1 GPU, 5,000 s) and job 4 (1 GPU,
    # 50 s). Bound 300 s: at the round t=420 job 2 has waited 410 s → the head; shadow = 1,000 (job
    # 1's end), spare = 1 + 3 − 4 = 0. Job 4 ends at 470 ≤ 1,000: backfilled at 420. Job 3 would end
    # at ≥ 5,420 > 1,000 with 1 > 0 spare GPUs: held. Job 2 starts at the round after 1,000: 1,020,
    # ends 1,520; job 3 at 1,560 (26 × 60), ends 6,560. Skipping idle rounds changes nothing.
    profile = FakeProfile(memory={"m": (30_000, 0)})
    jobs = [
        job(1, gpus=3, iterations=1000),
        job(2, gpus=4, iterations=500, submit=10.0),
        job(3, gpus=1, iterations=5000, submit=400.0),
        job(4, gpus=1, iterations=50, submit=400.0),
    ]
    config = SimConfig(scheduler=SchedulerConfig(starvation_bound_s=300.0))
    cluster = Cluster.uniform(1, 4)
    fast = simulate(jobs, cluster, get_policy("sjf-bsbf-fair"), profile, config)
    slow = simulate(
        jobs, cluster, get_policy("sjf-bsbf-fair"), profile, replace(config, skip_idle_rounds=False)
    )
    assert {o.job_id: (o.first_start, o.end_time) for o in fast.outcomes} == {
        1: (0.0, 1000.0),
        2: (1020.0, 1520.0),
        3: (1560.0, 6560.0),
        4: (420.0, 470.0),
    }
    assert fast.outcomes == slow.outcomes and fast.timeline == slow.timeline
    assert fast.rounds < slow.rounds


def test_borrowed_work_finishes_while_owners_keep_arriving() -> None:
    # liveness under reclaim "preempt": a (no guarantee) borrows the whole 8-GPU cluster with jobs
    # 1 (4 GPUs, 3,000 s) and 2 (4 GPUs, 2,000 s); b (guarantee 8) submits 30 jobs of 100 s every
    # 250 s (8 or 4 GPUs). Every job finishes; only a's jobs are ever preempted (they are the only
    # borrowed ones), and each preemption is counted once in a job's outcome.
    profile = FakeProfile(memory={"m": (10_000, 0)})
    quotas = {"a": TenantQuota(0), "b": TenantQuota(8)}
    jobs = [job(1, gpus=4, tenant="a", iterations=3000), job(2, gpus=4, tenant="a", iterations=2000)]
    jobs += [
        job(10 + k, gpus=8 if k % 3 == 0 else 4, tenant="b", iterations=100, submit=250.0 * k + 5)
        for k in range(30)
    ]
    config = SimConfig(scheduler=SchedulerConfig(reclaim="preempt"), tenant_quotas=quotas)
    result = simulate(jobs, Cluster.uniform(1, 8), get_policy("sjf-bsbf-fair"), profile, config)
    assert result.unfinished == () and len(result.outcomes) == 32
    assert all(o.preemptions == 0 for o in result.outcomes if o.tenant == "b")
    assert result.preemptions == sum(o.preemptions for o in result.outcomes) > 0


def test_decide_is_deterministic_and_mutates_nothing() -> None:
    # a (no guarantee) borrows all 8 GPUs; b (guarantee 8) waits with an 8-GPU and a 4-GPU job.
    # Reclaim: job 10 (8 GPUs) needs 8, 0 idle → preempt both borrowed jobs (4 + 4 freed);
    # job 11: u_b = 8 after the claim, 8 + 4 > 8 → claims nothing. Same answer on every call.
    quotas = {"a": TenantQuota(0), "b": TenantQuota(8)}
    a1, a2 = job(1, gpus=4, tenant="a", iterations=3000), job(2, gpus=4, tenant="a", iterations=2000)
    pending = (job(10, gpus=8, tenant="b", submit=100.0), job(11, gpus=4, tenant="b", submit=200.0))
    s = Snapshot(
        500.0,
        Cluster.uniform(1, 8),
        pending,
        (running(a1, (0, 1, 2, 3), 0.0), running(a2, (4, 5, 6, 7), 10.0)),
        SchedulerConfig(starvation_bound_s=100.0),
        dict(quotas),
    )
    before = copy.deepcopy(s)
    profile = FakeProfile(memory={"m": (10_000, 0)})
    policy = get_policy("sjf-bsbf-fair")
    first = policy.decide(s, profile)
    assert policy.decide(s, profile) == first == get_policy("sjf-bsbf-fair").decide(s, profile)
    assert s == before
    assert [p.job_id for p in first.preemptions] == [1, 2]
    assert first.starts[0].job_id == 10 and first.starts[0].gpu_ids == tuple(range(8))
