"""Reclaim keeps guarantees (issue 11 item 3): a victim's tenant never drops below its own
guarantee, victims are borrowed work first, whole gangs, the fewest GPUs that meet the need, and
no job flaps between preempted and started over many rounds. Smallest inputs, by hand."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scheduling.core.policies import get_policy
from scheduling.core.reclaim import reclaim_preemptions
from scheduling.core.types import Cluster, Job, Placement, RunningJob, SchedulerConfig, Snapshot, TenantQuota
from tests.unit.fakes import FakeProfile, job

ALONE = FakeProfile(memory={"m": (40_000, 0)})  # two jobs never share a GPU
SHARING = FakeProfile(memory={"m": (1000, 0)}, default_xi=1.4)  # two jobs fit a GPU, ξ 1.4
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
    assert {s.job_id: s.gpu_ids for s in d.starts} == {4: (5,)}


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


def test_a_victim_that_frees_no_gpu_does_not_use_up_its_tenants_room() -> None:
    # The Chronus defect (docs/FAIRNESS.md §5): c (guarantee 1) borrows x and y, 2 GPUs each;
    # x shares GPUs 4-5 with d1, which d (guarantee 5, 6 held) cannot give up. e (guarantee 0)
    # borrows z beside y on GPUs 2-3. An owner of b needs 2 GPUs. c can lose one job, not both
    # (4 - 2 - 2 < 1). The greedy walk took x first (most remaining time): it frees nothing, as
    # d1 stays, and used up c's room, so y could not follow and z alone frees nothing either:
    # no preemption at all. y and z together free GPUs 2-3
    quotas = {"b": TenantQuota(2), "c": TenantQuota(1), "d": TenantQuota(5), "e": TenantQuota(0)}
    x = job(1, gpus=2, tenant="c", iterations=100_000)
    y = job(2, gpus=2, tenant="c", iterations=50_000)
    z = job(3, gpus=2, tenant="e", iterations=10_000)
    d1 = job(4, gpus=2, tenant="d", iterations=100_000)
    d2 = job(5, gpus=4, tenant="d", iterations=100_000)
    owner = job(6, gpus=2, tenant="b", submit=900.0)
    run = [
        running(x, (4, 5), 10.0),
        running(y, (2, 3), 20.0),
        running(z, (2, 3), 30.0),
        running(d1, (4, 5), 0.0),
        running(d2, (0, 1, 6, 7), 1.0),
    ]
    for memo in (True, False):
        preempt, claimed = reclaim_preemptions(snap([owner], run, quotas), [owner], "p", memo=memo)
        assert [p.job_id for p in preempt] == [2, 3] and claimed == (6,)


def test_a_job_preempted_this_round_counts_as_waiting_for_the_colocation_guard() -> None:
    # 2 GPUs, each held alone by a job of c (guarantee 1: usage 2, 1 borrowed). a (guarantee 0)
    # submits job 3 (priority 1, 1 GPU) and job 4 (priority 0, 2 GPUs). Priority walk: no idle
    # GPU, so c's later-started job 2 goes (c: 2 - 1 = 1, at its guarantee) and 3 starts on GPU 1.
    # Job 4 could only share both GPUs: beside c's job 1 (ξ 1.4/1.4) c would be charged 0.5 of
    # GPU 0, 0.5 < 1, while c's job 2 waits again next round. Had 4 started, the next round's
    # co-location walk would preempt it for c (a flap): so it waits, refused by the guard
    quotas = {"a": TenantQuota(0), "c": TenantQuota(1)}
    first = job(1, tenant="c", iterations=10**6)
    second = job(2, tenant="c", iterations=10**6)
    high = replace(job(3, tenant="a", iterations=10**6, submit=900.0), priority=1)
    wide = job(4, gpus=2, tenant="a", iterations=10**6, submit=900.0)
    run = (running(first, (0,)), running(second, (1,), 10.0))
    s = Snapshot(1000.0, Cluster.uniform(1, 2), (high, wide), run, SchedulerConfig(), quotas)
    d = get_policy("sjf-bsbf-fair").decide(s, SHARING)
    assert [p.job_id for p in d.preemptions] == [2]
    assert {st.job_id: st.gpu_ids for st in d.starts} == {3: (1,)}
    assert "below its guarantee of 1" in {w.job_id: w.reason for w in d.waits}[4]


# -- no flapping: over many rounds of a fixed workload, preemptions stop --------------------------


def run_rounds(pending: list[Job], quotas: dict, rounds: int, profile: FakeProfile) -> list[list[int]]:
    """Drive ``rounds`` rounds of sjf-bsbf-fair 60 s apart on jobs that never finish, each
    arriving at its ``submit_time``: apply each round's preemptions and starts. Returns the
    preempted ids of every round."""
    policy = get_policy("sjf-bsbf-fair")
    arrivals = sorted(pending, key=lambda j: j.submit_time)
    waiting: dict[int, Job] = {}
    run: dict[int, RunningJob] = {}
    now = 0.0
    history: list[list[int]] = []
    for _ in range(rounds):
        while arrivals and arrivals[0].submit_time <= now:
            j = arrivals.pop(0)
            waiting[j.id] = j
        s = Snapshot(now, EIGHT, tuple(waiting.values()), tuple(run.values()), SchedulerConfig(), quotas)
        d = policy.decide(s, profile, explain=False)
        for p in d.preemptions:
            rj = run.pop(p.job_id)
            waiting[p.job_id] = replace(rj.job, queued_since=now)
        for start in d.starts:
            j = waiting.pop(start.job_id)
            run[start.job_id] = RunningJob(j, Placement(j.id, start.gpu_ids, start.sub_batch, now))
        on_gpu: dict[int, int] = {}
        for rj in run.values():
            for g in rj.placement.gpu_ids:
                on_gpu[g] = on_gpu.get(g, 0) + 1
        assert all(n <= 2 for n in on_gpu.values())
        history.append([p.job_id for p in d.preemptions])
        now += 60.0
    return history


jobs_strategy = st.lists(
    st.tuples(
        st.sampled_from("abc"),
        st.integers(1, 4),
        st.integers(0, 2),
        st.integers(10, 5000),
        st.integers(0, 15),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    jobs=jobs_strategy,
    guarantees=st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)),
    share=st.booleans(),
)
@example(  # c's job 9 preempted for a's priority-1 job 5, then a's jobs co-located onto c's GPUs
    # although c had 9 waiting again, so c reclaimed them next round (quota gate: requeued jobs)
    jobs=[*[("a", 1, 0, 10, 0)] * 4, ("a", 1, 1, 10, 1), ("a", 2, 0, 10, 0), ("b", 3, 0, 11, 0)]
    + [("c", 1, 0, 10, 0)] * 3
    + [("c", 2, 0, 10, 3)],
    guarantees=(0, 1, 4),
    share=True,
)
def test_no_job_flaps_between_preempted_and_started(
    jobs: list[tuple[str, int, int, int, int]], guarantees: tuple[int, int, int], share: bool
) -> None:
    # jobs arrive over the first 15 rounds and none ends within the 40: every preemption is for
    # an owner, a co-located owner or a higher priority, none of which the victim can answer in
    # kind. So no job is preempted twice without an arrival in between (no cycle), and the rounds
    # settle within two rounds of the last arrival
    pending = [
        replace(job(i + 1, gpus=g, tenant=t, iterations=10**6 + n, submit=60.0 * r), priority=p)
        for i, (t, g, p, n, r) in enumerate(jobs)
    ]
    quotas = {t: TenantQuota(q) for t, q in zip("abc", guarantees, strict=True)}
    history = run_rounds(pending, quotas, 40, SHARING if share else ALONE)
    arrivals = {r for *_, r in jobs}
    last: dict[int, int] = {}
    for k, ids in enumerate(history):
        for jid in ids:
            assert jid not in last or any(last[jid] < a <= k for a in arrivals), (jid, history)
            last[jid] = k
    assert not any(history[max(arrivals) + 3 :]), history
