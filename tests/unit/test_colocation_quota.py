"""Quota use by the normalised split in sjf-bsbf-fair (docs/FAIRNESS.md §1, issue 11 item 5): a
tenant co-locating onto another tenant's guaranteed GPUs is seen, refused while that tenant waits,
and reclaimed. Two GPUs, two tenants with one guaranteed GPU each; ξ = 1.3 for every pair, so a
shared GPU charges each job ½."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core.charge import running_charges, tenant_charge
from scheduling.core.policies import POLICY_NAMES, get_policy
from scheduling.core.types import (
    Cluster,
    Job,
    Placement,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TenantQuota,
    splits_quota_use,
)
from tests.unit.fakes import FakeProfile, job

SHARING = FakeProfile(memory={"m": (1000, 0)}, default_xi=1.3)
TWO = Cluster.uniform(1, 2)
QUOTAS = {"a": TenantQuota(1), "b": TenantQuota(1)}


def running(j: Job, gpu_ids: tuple[int, ...], start: float = 0.0, sub_batch: int | None = None) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, sub_batch or j.batch_size, start))


def snap(pending: list[Job], run: list[RunningJob]) -> Snapshot:
    return Snapshot(1000.0, TWO, tuple(pending), tuple(run), SchedulerConfig(), QUOTAS)


def test_a_shared_gpu_counts_half_for_each_tenant() -> None:
    a, b = job(1, tenant="a"), job(2, tenant="b")
    run = [running(a, (0,)), running(b, (0,))]
    assert running_charges(run, SHARING) == {1: 0.5, 2: 0.5}
    assert tenant_charge(run, SHARING) == {"a": 0.5, "b": 0.5}
    # ξ_a = 1, ξ_b = 3: a pays ξ_b / (ξ_a + ξ_b) = ¾
    uneven = FakeProfile(memory={"m": (1000, 0)}, slowdowns={("m", "m"): (1.0, 3.0)})
    assert running_charges(run, uneven) == {1: 0.75, 2: 0.25}


def a_resident_b_resident() -> list[RunningJob]:
    # a's job 1 alone on GPU 0 never shares; b's job 2 alone on GPU 1 may (both P = 1,000 s)
    a_own = replace(job(1, tenant="a", iterations=1000), sharing_allowed=False)
    return [running(a_own, (0,)), running(job(2, tenant="b", iterations=1000), (1,), 10.0)]


def test_no_co_location_onto_an_owner_that_waits() -> None:
    # a's new job could only join b's job on GPU 1; b waits (a 2-GPU job), and sharing would take
    # b from 1 to ½ normalised GPU, below its guarantee: refused
    newcomer = job(3, tenant="a", iterations=1000, submit=900.0)
    b_waits = job(4, gpus=2, tenant="b", iterations=1000, submit=900.0)
    d = get_policy("sjf-bsbf-fair").decide(snap([newcomer, b_waits], a_resident_b_resident()), SHARING)
    assert d.starts == ()
    why = {w.job_id: w.reason for w in d.waits}[3]
    assert "co-locating onto tenant b's GPUs would take it below its guarantee of 1" in why


def test_co_location_onto_an_owner_with_nothing_waiting_is_allowed() -> None:
    newcomer = job(3, tenant="a", iterations=1000, submit=900.0)
    d = get_policy("sjf-bsbf-fair").decide(snap([newcomer], a_resident_b_resident()), SHARING)
    assert [(s.job_id, s.gpu_ids) for s in d.starts] == [(3, (1,))]


@pytest.mark.parametrize("policy", ["sjf-bsbf"])
def test_the_paper_policy_still_counts_whole_gpus(policy: str) -> None:
    # only sjf-bsbf-fair reads the normalised split; sjf-bsbf shares as before
    newcomer = job(3, tenant="a", iterations=1000, submit=900.0)
    b_waits = job(4, gpus=2, tenant="b", iterations=1000, submit=900.0)
    d = get_policy(policy).decide(snap([newcomer, b_waits], a_resident_b_resident()), SHARING)
    assert [(s.job_id, s.gpu_ids) for s in d.starts] == [(3, (1,))]


def test_a_job_co_located_onto_a_waiting_owners_gpu_is_reclaimed() -> None:
    # a's job 3 joined b's job 2 on GPU 1 while b had nothing waiting; now b waits. a holds
    # 1 + ½ ≥ its guarantee of 1 without job 3's ½, b holds ½ < 1: job 3 is preempted, b's own job
    # runs alone again (b is back at 1)
    run = [*a_resident_b_resident(), running(job(3, tenant="a", iterations=1000), (1,), 500.0)]
    b_waits = job(4, gpus=2, tenant="b", iterations=1000, submit=900.0)
    d = get_policy("sjf-bsbf-fair").decide(snap([b_waits], run), SHARING)
    assert [p.job_id for p in d.preemptions] == [3]
    assert "co-located on GPUs of tenant b" in d.preemptions[0].reason
    assert d.starts == ()


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_splits_quota_use_is_what_the_gate_counts(name: str) -> None:
    # a (2 guaranteed, no borrowing) runs two jobs sharing GPU 0 and asks for GPU 1. By the split
    # it holds ½ + ½ = 1, + 1 = 2 ≤ cap 2: starts; by gangs 1 + 1 + 1 = 3 > 2: waits. The policy's
    # declared splits_quota_use (read by the service's over-quota view) must say which it does
    policy = get_policy(name)
    run = [
        running(job(1, tenant="a", iterations=1000), (0,)),
        running(job(2, tenant="a", iterations=1000), (0,)),
    ]
    pending = job(3, tenant="a", iterations=1000, submit=900.0)
    snapshot = Snapshot(1000.0, TWO, (pending,), tuple(run), SchedulerConfig(), {"a": TenantQuota(2, 0)})
    d = policy.decide(snapshot, SHARING)
    if splits_quota_use(policy):
        assert [(s.job_id, s.gpu_ids) for s in d.starts] == [(3, (1,))]
    else:
        assert d.starts == ()
        assert [w.reason for w in d.waits] == [
            "tenant a would hold 3 GPUs, above its quota cap of 2 (2 guaranteed + 0 borrowable)"
        ]
    assert splits_quota_use(policy) == (name == "sjf-bsbf-fair")


def test_a_policy_that_declares_nothing_counts_gangs() -> None:
    assert splits_quota_use(object()) is False
