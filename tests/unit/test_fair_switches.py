"""sjf-bsbf-fair's switches (SchedulerConfig.split_charge, colocation_guard, reclaim_colocated,
priority_preemption; docs/FAIRNESS.md §5) and the guarantee monitor agreeing with reclaim on a
gang only partly above its guarantee (§4). Smallest inputs, by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.core.fairness import GuaranteeMonitor, guarantee_violations
from scheduling.core.policies import get_policy
from scheduling.core.quota import QuotaGate
from scheduling.core.reclaim import reclaim_preemptions
from scheduling.core.types import (
    FAIR_SWITCHES,
    Cluster,
    Job,
    Placement,
    RunningJob,
    SchedulerConfig,
    Share,
    Snapshot,
    TenantQuota,
    fair_switches_off,
)
from tests.unit.fakes import FakeProfile, job

ALONE = FakeProfile(memory={"m": (40_000, 0)})  # two jobs never share a GPU
THREE = Cluster.uniform(1, 3)


def running(j: Job, gpu_ids: tuple[int, ...], start: float = 0.0) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, j.batch_size, start))


def straddling(second_gang: bool) -> Snapshot:
    # 3 GPUs; a (g = 2) runs 1 GPU and waits for 1 more within its guarantee; b (g = 1) holds the
    # other 2 GPUs: one 2-GPU gang (1 GPU above its guarantee), or with ``second_gang`` two 1-GPU
    # jobs (the later one wholly borrowed)
    quotas = {"a": TenantQuota(2), "b": TenantQuota(1)}
    a_run = running(job(1, tenant="a"), (2,))
    if second_gang:
        b = [running(job(2, tenant="b"), (0,)), running(job(3, tenant="b"), (1,), 10.0)]
    else:
        b = [running(job(2, gpus=2, tenant="b"), (0, 1))]
    owner = job(4, tenant="a", submit=500.0)
    return Snapshot(1000.0, THREE, (owner,), (a_run, *b), SchedulerConfig(), quotas)


def test_a_gang_only_partly_above_its_guarantee_is_not_lent_when_reclaim_keeps_guarantees() -> None:
    # b's 2-GPU gang counts as borrowed (held 2 > g_b = 1), so the old rule called its GPUs lent
    # and a's waiting job a violation; but taking the gang leaves b at 0 < 1, which reclaim refuses
    # (issue 11: a victim's tenant never drops below its guarantee). With keep_guarantees the
    # monitor agrees with reclaim: no GPU is lent, no violation, and reclaim preempts nothing
    s = straddling(second_gang=False)
    assert guarantee_violations(s, s.tenant_quotas) == [4]  # the old reading, kept for the others
    assert guarantee_violations(s, s.tenant_quotas, keep_guarantees=True) == []
    assert reclaim_preemptions(s, s.pending, "sjf-bsbf-fair") == ((), ())
    monitor = GuaranteeMonitor(s.tenant_quotas, grace_s=120.0, keep_guarantees=True)
    for now in (1000.0, 1200.0):
        monitor.observe(replace(s, now=now))
    assert monitor.violated == set() and monitor.longest_s == 0.0


def test_a_wholly_borrowed_job_is_lent_and_reclaimed_in_both_readings() -> None:
    # the same 3 GPUs with b's 2 GPUs as two 1-GPU jobs: the later one is borrowed and b keeps
    # 1 = g_b without it, so both the monitor and reclaim take it: a violation until it is preempted
    s = straddling(second_gang=True)
    assert guarantee_violations(s, s.tenant_quotas, keep_guarantees=True) == [4]
    preempts, claimed = reclaim_preemptions(s, s.pending, "sjf-bsbf-fair")
    assert [p.job_id for p in preempts] == [3] and claimed == (4,)


def test_switches_parse_and_default_on() -> None:
    config = SchedulerConfig()
    assert all(getattr(config, name) is True for name in FAIR_SWITCHES)
    assert fair_switches_off("") == {}
    assert fair_switches_off("split_charge, colocation_guard") == {
        "split_charge": False,
        "colocation_guard": False,
    }
    with pytest.raises(ValueError, match="unknown switch 'guard'"):
        fair_switches_off("guard")


def test_colocation_guard_off_lets_a_start_share_an_owners_gpus() -> None:
    # a (g = 1) runs 1 GPU and waits; b's job would join it with ξ 1 each: a keeps ½ < 1 → refused
    # with the guard, allowed without (usage is still counted by the split)
    a_run = running(job(1, tenant="a"), (0,))
    s = Snapshot(
        100.0, Cluster.uniform(1, 1), (job(2, tenant="a"), job(3, tenant="b")), (a_run,), SchedulerConfig(),
        {"a": TenantQuota(1), "b": TenantQuota(0)},
    )  # fmt: skip
    share = [Share(1, (0,), 1.0, 1.0, 2.0, 2.0)]
    assert "below its guarantee" in (QuotaGate(s, charges={1: 1.0}).share_refusal(s.pending[1], share) or "")
    off = replace(s, config=SchedulerConfig(colocation_guard=False))
    assert QuotaGate(off, charges={1: 1.0}).share_refusal(off.pending[1], share) is None


def test_priority_preemption_off_keeps_lower_priority_borrowed_work() -> None:
    # 1 GPU; b (no guarantee) borrows it at priority 0; a (no guarantee either) waits at priority 5:
    # the priority walk preempts b's job, and with priority_preemption off nothing is preempted
    quotas = {"a": TenantQuota(0), "b": TenantQuota(0)}
    low = running(job(1, tenant="b"), (0,))
    high = replace(job(2, tenant="a", submit=50.0), priority=5)
    s = Snapshot(100.0, Cluster.uniform(1, 1), (high,), (low,), SchedulerConfig(), quotas)
    assert [p.job_id for p in get_policy("sjf-bsbf-fair").decide(s, ALONE).preemptions] == [1]
    off = replace(s, config=SchedulerConfig(priority_preemption=False))
    assert get_policy("sjf-bsbf-fair").decide(off, ALONE).preemptions == ()


def test_reclaim_colocated_off_leaves_a_partner_on_an_owners_gpu() -> None:
    # 1 GPU: a's job (g_a = 1) shares it ½/½ with b's job (g_b = 0), so a holds ½ < 1 with a job
    # waiting; the co-location walk preempts b's job (b keeps 0 ≥ 0); switched off, nothing
    quotas = {"a": TenantQuota(1), "b": TenantQuota(0)}
    run = (running(job(1, tenant="a"), (0,)), running(job(2, tenant="b"), (0,), 10.0))
    s = Snapshot(100.0, Cluster.uniform(1, 1), (job(3, tenant="a"),), run, SchedulerConfig(), quotas)
    shares = {0: {1: 0.5, 2: 0.5}}
    assert [p.job_id for p in reclaim_preemptions(s, s.pending, "sjf-bsbf-fair", shares=shares)[0]] == [2]
    off = replace(s, config=SchedulerConfig(reclaim_colocated=False))
    assert reclaim_preemptions(off, off.pending, "sjf-bsbf-fair", shares=shares) == ((), ())


def test_the_monitor_counts_usage_by_the_split_the_policy_uses() -> None:
    # 2 GPUs; a (g = 1) waits for 1 GPU; b (g = 1) runs job 2 on GPU 0, shared ½/½ with c's job 5,
    # and later job 3 alone on GPU 1. In whole gangs b holds 2, job 3 is borrowed and b keeps 1
    # without it: GPU 1 is lent, a's job a violation. By the split b holds 1.5 and keeps only ½
    # without job 3 (< 1), so reclaim may not take it: GPU 1 is not lent, and GPU 0 holds b's job
    # within its guarantee — no violation in the policy's own reading
    quotas = {"a": TenantQuota(1), "b": TenantQuota(1), "c": TenantQuota(0)}
    run = (
        running(job(2, tenant="b"), (0,)),
        running(job(5, tenant="c"), (0,), 5.0),
        running(job(3, tenant="b"), (1,), 10.0),
    )
    s = Snapshot(100.0, Cluster.uniform(1, 2), (job(4, tenant="a"),), run, SchedulerConfig(), quotas)
    assert guarantee_violations(s, quotas, keep_guarantees=True) == [4]
    split = {2: 0.5, 5: 0.5, 3: 1.0}
    assert guarantee_violations(s, quotas, keep_guarantees=True, charges=split) == []
