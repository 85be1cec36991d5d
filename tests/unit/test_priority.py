"""Priority classes (docs/PRIORITY.md): ordering within a tenant, and preemption of borrowed
lower-priority work, never below a tenant's guarantee. Smallest inputs, by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core.policies import get_policy
from scheduling.core.priority import by_priority_within_tenants
from scheduling.core.types import Cluster, Job, Placement, RunningJob, SchedulerConfig, Snapshot, TenantQuota
from tests.unit.fakes import FakeProfile, job

ALONE = FakeProfile(memory={"m": (40_000, 0)})  # two jobs never share a GPU
EIGHT = Cluster.uniform(1, 8)


def prio(j: Job, p: int) -> Job:
    return replace(j, priority=p)


def running(j: Job, gpu_ids: tuple[int, ...], start: float = 0.0) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, j.batch_size, start))


def snap(pending: list[Job], run: list[RunningJob], quotas: dict, **config: object) -> Snapshot:
    return Snapshot(1000.0, EIGHT, tuple(pending), tuple(run), SchedulerConfig(**config), quotas)


def started(s: Snapshot, policy: str = "sjf-bsbf-fair") -> tuple[list[int], dict[int, tuple[int, ...]]]:
    d = get_policy(policy).decide(s, ALONE)
    return [p.job_id for p in d.preemptions], {st.job_id: st.gpu_ids for st in d.starts}


def test_each_tenant_keeps_its_positions_and_fills_them_highest_priority_first() -> None:
    a1, b1, a2 = job(1, tenant="a"), job(2, tenant="b"), prio(job(3, tenant="a"), 5)
    assert by_priority_within_tenants([a1, b1, a2]) == [a2, b1, a1]
    assert by_priority_within_tenants([a2, b1, a1]) == [a2, b1, a1]  # idempotent
    same = [job(1), job(2)]
    assert by_priority_within_tenants(same) == same


@pytest.mark.parametrize(("policy", "first"), [("sjf-bsbf-fair", 2), ("sjf-bsbf", 1), ("fifo", 1)])
def test_a_higher_priority_job_of_the_same_tenant_takes_the_one_idle_gpu(policy: str, first: int) -> None:
    # one idle GPU; tenant a waits with a short job (P = 10 s, submitted first) and a long one
    # (P = 1,000 s) of priority 5: the long one starts under sjf-bsbf-fair; the paper baselines
    # keep their published order (their simulators ignore the traces' priority column)
    busy = [running(job(10 + k, tenant="z", iterations=10_000), (k,)) for k in range(7)]
    short, long = job(1, tenant="a", iterations=10), prio(job(2, tenant="a", iterations=1000, submit=1.0), 5)
    assert started(snap([short, long], busy, {}), policy)[1] == {first: (7,)}


def test_priority_does_not_reorder_across_tenants() -> None:
    # b's short job comes first in SJF order; a's priority-9 job does not overtake it
    busy = [running(job(10 + k, tenant="z", iterations=10_000), (k,)) for k in range(7)]
    b_short, a_long = job(1, tenant="b", iterations=10), prio(job(2, tenant="a", iterations=1000), 9)
    assert started(snap([b_short, a_long], busy, {}))[1] == {1: (7,)}


def lent_cluster(priority: int) -> Snapshot:
    # a (guarantee 4) holds its 4; c (no guarantee) borrows the other 4 as two 2-GPU jobs of
    # priority 0 (job 21 with more remaining time); a's new 2-GPU job has ``priority``
    a_own = [running(job(10 + k, tenant="a", iterations=10_000), (k,), 0.0) for k in range(4)]
    c_lent = [
        running(job(21, gpus=2, tenant="c", iterations=9_000), (4, 5), 10.0),
        running(job(22, gpus=2, tenant="c", iterations=5_000), (6, 7), 20.0),
    ]
    urgent = prio(job(1, gpus=2, tenant="a", submit=900.0), priority)
    return snap([urgent], a_own + c_lent, {"a": TenantQuota(4), "c": TenantQuota(0)})


def test_a_higher_priority_arrival_preempts_borrowed_lower_priority_work_and_starts_at_once() -> None:
    assert started(lent_cluster(5)) == ([21], {1: (4, 5)})


def test_an_equal_priority_arrival_preempts_nothing() -> None:
    assert started(lent_cluster(0)) == ([], {})


def test_priority_preempts_its_own_tenants_borrowed_lower_priority_job() -> None:
    # a (guarantee 4) holds 4 guaranteed + a borrowed 2-GPU job of priority 0; b (guarantee 2)
    # holds its 2. a's priority-5 2-GPU job replaces a's own borrowed one
    a_run = [running(job(10 + k, tenant="a", iterations=10_000), (k,), 0.0) for k in range(4)]
    a_lent = running(job(20, gpus=2, tenant="a", iterations=9_000), (4, 5), 10.0)
    b_run = running(job(30, gpus=2, tenant="b", iterations=9_000), (6, 7), 5.0)
    urgent = prio(job(1, gpus=2, tenant="a", submit=900.0), 5)
    s = snap([urgent], [*a_run, a_lent, b_run], {"a": TenantQuota(4), "b": TenantQuota(2)})
    assert started(s) == ([20], {1: (4, 5)})


def test_priority_never_preempts_work_within_its_tenants_guarantee() -> None:
    # c's 4 GPUs are its guarantee now: a's priority-9 job waits
    a_own = [running(job(10 + k, tenant="a", iterations=10_000), (k,), 0.0) for k in range(4)]
    c_own = [running(job(21 + k, tenant="c", iterations=9_000), (4 + k,), 10.0) for k in range(4)]
    urgent = prio(job(1, gpus=1, tenant="a", submit=900.0), 9)
    s = snap([urgent], a_own + c_own, {"a": TenantQuota(4), "c": TenantQuota(4)})
    assert started(s) == ([], {})


def test_priority_preemption_respects_the_cap() -> None:
    # a's borrow limit is 0: its priority-5 job may not borrow, so nothing is preempted for it
    s = lent_cluster(5)
    s = replace(s, tenant_quotas={"a": TenantQuota(4, 0), "c": TenantQuota(0)})
    assert started(s) == ([], {})


def test_priority_preemption_is_off_in_reclaim_mode_bound() -> None:
    assert started(replace(lent_cluster(5), config=SchedulerConfig(reclaim="bound"))) == ([], {})
