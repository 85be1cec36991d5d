"""Reclaim's victims asked once per question (issue 16 item 1): while a reclaim pass has not
changed, ``ReclaimPass.pick`` answers a repeated ``(need, not_of, below_priority)`` from what it
worked out the first time. The answers must be the very ones worked out afresh for every job
(``memo=False``), on random clusters of tenants, quotas, priorities, gangs and co-located pairs,
for the reclaim step and for the whole ``sjf-bsbf-fair`` decision; and by hand, the memo must
actually save the work (one victim search for thirty identical waiting jobs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.core import reclaim
from scheduling.core.charge import gpu_shares
from scheduling.core.policies.sjf_bsbf_fair import SjfBsbfFairPolicy, fair_order
from scheduling.core.reclaim import reclaim_preemptions
from scheduling.core.types import Cluster, Job, Placement, RunningJob, SchedulerConfig, Snapshot, TenantQuota
from tests.unit.fakes import FakeProfile, job

SHARING = FakeProfile(memory={"m": (1000, 0)}, default_xi=1.4)  # two jobs fit a GPU, ξ 1.4
CLUSTER = Cluster.uniform(3, 4)  # 12 GPUs
TENANTS = "abc"


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    """Running gangs placed on consecutive GPUs, some 1-GPU jobs co-located with a 1-GPU
    resident, waiting jobs of every size and priority, a quota per tenant."""
    run: list[RunningJob] = []
    next_id, gpu = 1, 0
    singles: list[int] = []  # GPUs holding a 1-GPU job alone
    for _ in range(draw(st.integers(0, 10))):
        gang = draw(st.sampled_from([1, 1, 2, 3, 4]))
        if gpu + gang > CLUSTER.size:
            break
        j = job(
            next_id,
            gpus=gang,
            tenant=draw(st.sampled_from(TENANTS)),
            iterations=draw(st.integers(10, 5_000)),
        )
        j = replace(j, priority=draw(st.sampled_from([-10, 0, 0, 50])))
        ids = tuple(range(gpu, gpu + gang))
        run.append(RunningJob(j, Placement(j.id, ids, j.batch_size, float(draw(st.integers(0, 900))))))
        if gang == 1:
            singles.append(gpu)
        next_id, gpu = next_id + 1, gpu + gang
    for g in singles:  # a partner for some of them: two jobs on one GPU at most
        if draw(st.booleans()):
            j = replace(
                job(next_id, tenant=draw(st.sampled_from(TENANTS)), iterations=draw(st.integers(10, 5_000))),
                priority=draw(st.sampled_from([-10, 0, 50])),
            )
            run.append(RunningJob(j, Placement(j.id, (g,), j.batch_size, float(draw(st.integers(0, 900))))))
            next_id += 1
    pending: list[Job] = []
    for _ in range(draw(st.integers(0, 25))):
        j = job(
            next_id,
            gpus=draw(st.sampled_from([1, 2, 4, 5, 12, 13])),
            tenant=draw(st.sampled_from(TENANTS)),
            iterations=draw(st.integers(10, 5_000)),
            submit=float(draw(st.integers(0, 990))),
        )
        pending.append(replace(j, priority=draw(st.sampled_from([-10, 0, 50, 100]))))
        next_id += 1
    quotas = {
        t: TenantQuota(draw(st.integers(0, 5)), draw(st.sampled_from([None, 0, 2, 6]))) for t in TENANTS
    }
    config = SchedulerConfig(
        reclaim=draw(st.sampled_from(["preempt", "both"])),
        borrow_bound_s=draw(st.sampled_from([100.0, 10_000.0])),
        reclaim_colocated=draw(st.booleans()),
        priority_preemption=draw(st.booleans()),
    )
    return Snapshot(1000.0, CLUSTER, tuple(pending), tuple(run), config, quotas)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots(), split=st.booleans())
def test_remembered_victims_are_the_ones_worked_out_afresh(snapshot: Snapshot, split: bool) -> None:
    order = fair_order(snapshot)
    shares = gpu_shares(snapshot.running, SHARING) if split else None
    fresh = reclaim_preemptions(snapshot, order, "p", shares=shares, memo=False)
    assert reclaim_preemptions(snapshot, order, "p", shares=shares) == fresh


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots())
def test_fair_decisions_with_the_memo_are_those_from_scratch(snapshot: Snapshot) -> None:
    for explain in (True, False):
        got = SjfBsbfFairPolicy().decide(snapshot, SHARING, explain=explain)
        assert got == SjfBsbfFairPolicy(incremental=False).decide(snapshot, SHARING, explain=explain)


def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the victim searches worked out (``ReclaimPass.choose`` calls)."""
    calls = [0]
    choose = reclaim.ReclaimPass.choose

    def counting(
        self: reclaim.ReclaimPass, need: int, not_of: str | None, below_priority: int | None
    ) -> list[RunningJob] | None:
        calls[0] += 1
        return choose(self, need, not_of, below_priority)

    monkeypatch.setattr(reclaim.ReclaimPass, "choose", counting)
    return calls


def blocked_cluster(waiting: int) -> tuple[Snapshot, list[Job]]:
    """8 GPUs: tenant a (guarantee 8) runs two 4-GPU jobs of priority 0, both within its
    guarantee, so neither may be preempted; tenant b (no guarantee, may borrow 8) waits with
    ``waiting`` jobs of 4 GPUs and priority 100."""
    cluster = Cluster.uniform(1, 8)
    run = [
        RunningJob(job(1, gpus=4, tenant="a"), Placement(1, (0, 1, 2, 3), 32, 0.0)),
        RunningJob(job(2, gpus=4, tenant="a"), Placement(2, (4, 5, 6, 7), 32, 10.0)),
    ]
    pending = [
        replace(job(10 + i, gpus=4, tenant="b", submit=float(i)), priority=100) for i in range(waiting)
    ]
    quotas = {"a": TenantQuota(8), "b": TenantQuota(0, 8)}
    return Snapshot(1000.0, cluster, tuple(pending), tuple(run), SchedulerConfig(), quotas), pending


def test_thirty_identical_blocked_jobs_cost_one_victim_search(monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot, pending = blocked_cluster(30)
    calls = counted(monkeypatch)
    assert reclaim_preemptions(snapshot, pending, "p") == ((), ())
    assert calls[0] == 1  # the priority walk's one question (4 GPUs, below priority 100)
    calls[0] = 0
    assert reclaim_preemptions(snapshot, pending, "p", memo=False) == ((), ())
    assert calls[0] == 30  # afresh: once per waiting job


def test_a_take_makes_the_next_job_ask_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # a now holds no guarantee: both its 4-GPU jobs are borrowed and of lower priority, so b's
    # first job preempts one (the latest started, the fewest GPUs: job 2), the second the other;
    # the third finds nothing left — three searches, since each take changes the answer
    snapshot, pending = blocked_cluster(3)
    snapshot = replace(snapshot, tenant_quotas={"a": TenantQuota(0, 8), "b": TenantQuota(0, 8)})
    calls = counted(monkeypatch)
    preempt, claimed = reclaim_preemptions(snapshot, pending, "p")
    assert sorted(p.job_id for p in preempt) == [1, 2] and claimed == (10, 11)
    assert calls[0] == 3
