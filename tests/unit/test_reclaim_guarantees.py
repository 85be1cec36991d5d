"""Reclaim keeps guarantees (issue 11 item 3): a victim's tenant never drops below its own
guarantee, victims are borrowed work first, whole gangs, the fewest GPUs that meet the need, and
no job flaps between preempted and started over many rounds. Smallest inputs, by hand."""

from __future__ import annotations

from scheduling.core.policies import get_policy
from scheduling.core.reclaim import reclaim_preemptions
from scheduling.core.types import Cluster, Job, Placement, RunningJob, SchedulerConfig, Snapshot, TenantQuota
from tests.unit.fakes import FakeProfile, job

ALONE = FakeProfile(memory={"m": (40_000, 0)})  # two jobs never share a GPU
EIGHT = Cluster.uniform(1, 8)


def running(j: Job, gpu_ids: tuple[int, ...], start: float = 0.0) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, j.batch_size, start))


def snap(pending: list[Job], run: list[RunningJob], quotas: dict, now: float = 1000.0) -> Snapshot:
    return Snapshot(now, EIGHT, tuple(pending), tuple(run), SchedulerConfig(), quotas)


def test_reclaim_never_pushes_a_guaranteed_tenant_below_its_guarantee() -> None:
    # the defect: a (guarantee 4) runs one 5-GPU job (1 GPU above its guarantee, so the
    # job counts as borrowed, with the most remaining time); c (no guarantee) borrows 1 GPU; b
    # (guarantee 3) runs 2 and submits 1 within its guarantee. The old rule preempted a's whole
    # 5-GPU job (a fell to 0 of its 4); the 1 GPU must come from c, whose guarantee is 0
    quotas = {"a": TenantQuota(4), "b": TenantQuota(3), "c": TenantQuota(0)}
    big = job(1, gpus=5, tenant="a", iterations=100_000)
    lent = job(2, gpus=1, tenant="c", iterations=1_000)
    b_run = job(3, gpus=2, tenant="b")
    owner = job(4, gpus=1, tenant="b", submit=900.0)
    run = [running(big, (0, 1, 2, 3, 4)), running(lent, (5,), 10.0), running(b_run, (6, 7), 20.0)]
    s = snap([owner], run, quotas)
    preempt, claimed = reclaim_preemptions(s, [owner], "p")
    assert [p.job_id for p in preempt] == [2] and claimed == (4,)
    d = get_policy("sjf-bsbf-fair").decide(s, ALONE)
    assert [p.job_id for p in d.preemptions] == [2]
    assert {st.job_id: st.gpu_ids for st in d.starts} == {4: (5,)}


def test_no_victim_when_every_borrower_sits_at_its_guarantee() -> None:
    # a's 5-GPU job is its only job: preempting it would take a from 5 to 0 < 4, so b's owner
    # waits (a drains its one borrowed GPU when that job ends)
    quotas = {"a": TenantQuota(4), "b": TenantQuota(4)}
    big = job(1, gpus=5, tenant="a", iterations=100_000)
    b_run = job(2, gpus=3, tenant="b")
    owner = job(3, gpus=1, tenant="b", submit=900.0)
    s = snap([owner], [running(big, (0, 1, 2, 3, 4)), running(b_run, (5, 6, 7), 10.0)], quotas)
    assert reclaim_preemptions(s, [owner], "p") == ((), ())


def test_victims_are_the_fewest_gpus_that_meet_the_need() -> None:
    # a (guarantee 0) borrows a 4-GPU job (most remaining time) and a 1-GPU job; b needs 1 GPU
    # within its guarantee: the 1-GPU job goes, not the 4-GPU one (SRTF order alone would take it)
    quotas = {"a": TenantQuota(0), "b": TenantQuota(4)}
    four = job(1, gpus=4, tenant="a", iterations=100_000)
    one = job(2, gpus=1, tenant="a", iterations=1_000)
    b_run = job(3, gpus=3, tenant="b")
    owner = job(4, gpus=1, tenant="b", submit=900.0)
    run = [running(four, (0, 1, 2, 3)), running(one, (4,), 10.0), running(b_run, (5, 6, 7), 20.0)]
    preempt, claimed = reclaim_preemptions(snap([owner], run, quotas), [owner], "p")
    assert [p.job_id for p in preempt] == [2] and claimed == (4,)
