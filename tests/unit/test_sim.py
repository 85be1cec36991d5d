"""The discrete-event simulator on tiny traces whose JCTs are worked out by hand."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from scheduling.core import metrics
from scheduling.core.skip import SkipRule, never
from scheduling.core.types import (
    Cluster,
    Job,
    Preempt,
    RoundDecisions,
    Snapshot,
    Start,
)
from scheduling.sim.engine import SimConfig, SimResult, SimulationError, simulate


def job(
    jid: int,
    submit: float,
    iterations: int,
    iter_s: float = 1.0,
    gpus: int = 1,
    model: str = "m",
    tenant: str = "t",
    batch: int = 8,
) -> Job:
    return Job(jid, tenant, model, batch, gpus, iterations, submit, iter_s)


@dataclass
class FakeProfile:
    """Exclusive iteration time = the job's own; ξ from a per-model-pair table; fixed memory."""

    xi: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    mem_mb: float = 1000.0

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        return job.iter_time_s * (2.0 if sub_batch < job.batch_size else 1.0)

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        return self.mem_mb

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        return (job.batch_size,)

    def memory_known(self, job: Job) -> bool:
        return True

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        return True

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        if (a.model, b.model) in self.xi:
            return self.xi[(a.model, b.model)]
        xb, xa = self.xi[(b.model, a.model)]
        return xa, xb


class Scripted:
    """A policy that returns the decisions listed for each round instant (and nothing else)."""

    preemptive = True

    def __init__(self, script: dict[float, RoundDecisions], name: str = "scripted") -> None:
        self.script = script
        self.name = name
        self.calls: list[Snapshot] = []

    def decide(self, snapshot: Snapshot, profile: object, *, explain: bool = True) -> RoundDecisions:
        self.calls.append(snapshot)
        return self.script.get(snapshot.now, RoundDecisions(self.name, snapshot.now))


class Greedy:
    """Exclusive gangs in ``key`` order, lowest free GPU ids first, no backfilling past a blocked
    job (a simple FIFO/SJF for engine tests; the real policies are tested elsewhere)."""

    preemptive = False
    # no preemption, nothing that changes while time alone passes (FIFO's and SJF's rule)
    skip_rule = SkipRule(capacity=True, shares=False, horizon=never)

    def __init__(self, name: str, key: Callable[[Job], tuple]) -> None:
        self.name = name
        self.key = key

    def decide(self, snapshot: Snapshot, profile: object, *, explain: bool = True) -> RoundDecisions:
        used = {g for r in snapshot.running for g in r.placement.gpu_ids}
        free = [g.id for g in snapshot.cluster.gpus if g.id not in used]
        starts = []
        for j in sorted(snapshot.pending, key=self.key):
            if j.gpus > len(free):
                break
            gpus, free = tuple(free[: j.gpus]), free[j.gpus :]
            starts.append(Start(j.id, gpus, j.batch_size, 1))
        return RoundDecisions(self.name, snapshot.now, tuple(starts))


FIFO = Greedy("fifo", lambda j: (j.submit_time, j.id))
SJF = Greedy("sjf", lambda j: (j.remaining_time_s, j.submit_time, j.id))


def ends(result: SimResult) -> dict[int, float]:
    return {o.job_id: o.end_time for o in result.outcomes}


def one_gpu(memory_mb: int = 49_140) -> Cluster:
    return Cluster.uniform(1, 1, memory_mb)


def test_two_jobs_one_gpu_fifo_waits_for_the_next_round() -> None:
    # A: 100 it x 1 s from t=0 -> runs 0..100. B arrives at 10; the GPU frees at 100, the next
    # round is at 120 -> B runs 120..170. JCT A = 100, B = 170 - 10 = 160.
    jobs = [job(1, 0, 100), job(2, 10, 50)]
    r = simulate(jobs, one_gpu(), FIFO, FakeProfile())
    assert ends(r) == {1: 100.0, 2: 170.0}
    assert sorted(o.jct_s for o in r.outcomes) == [100.0, 160.0]
    assert {o.job_id: o.queue_s for o in r.outcomes} == {1: 0.0, 2: 110.0}
    assert r.unfinished == ()


def test_round_on_events_starts_at_the_completion() -> None:
    # Same trace; a round at A's completion (t=100) starts B at once: B ends 150, JCT 140.
    jobs = [job(1, 0, 100), job(2, 10, 50)]
    r = simulate(jobs, one_gpu(), FIFO, FakeProfile(), SimConfig(round_on_events=True))
    assert ends(r) == {1: 100.0, 2: 150.0}


def test_round_interval_changes_the_start() -> None:
    # Rounds every 25 s: A completes at 100, which is a round instant -> B runs 100..150.
    # Rounds every 40 s: A starts at 0; B starts at the first round after 100, i.e. 120 -> 170;
    # rounds every 70 s: first round at 0, then 70, 140 -> B runs 140..190.
    jobs = [job(1, 0, 100), job(2, 10, 50)]
    assert ends(simulate(jobs, one_gpu(), FIFO, FakeProfile(), SimConfig(round_interval_s=25)))[2] == 150.0
    assert ends(simulate(jobs, one_gpu(), FIFO, FakeProfile(), SimConfig(round_interval_s=40)))[2] == 170.0
    assert ends(simulate(jobs, one_gpu(), FIFO, FakeProfile(), SimConfig(round_interval_s=70)))[2] == 190.0


def test_shared_gpu_is_charged_by_normalised_progress() -> None:
    # A and B (100 it x 1 s each) share GPU 0 from t=0 with xi_A = 1.2, xi_B = 1.8: A pays
    # 1.8 / 3.0 = 0.6 of each shared GPU-second, B 0.4. A ends at 100 x 1.2 = 120; B did
    # 120 / 1.8 = 66.67 it, 33.33 left alone -> ends 153.33. A: 120 x 0.6 = 72 GPU-s; B: 120 x 0.4
    # + 33.33 = 81.33 GPU-s; sum 153.33 = busy GPU-time (one GPU busy 0..153.33).
    profile = FakeProfile(xi={("a", "b"): (1.2, 1.8)})
    a, b = job(1, 0, 100, model="a"), job(2, 0, 100, model="b")
    policy = Scripted({0.0: RoundDecisions("scripted", 0.0, (Start(1, (0,), 8, 1), Start(2, (0,), 8, 1)))})
    r = simulate([a, b], one_gpu(), policy, profile)
    assert ends(r) == pytest.approx({1: 120.0, 2: 100.0 + 160.0 / 3})
    charged = {o.job_id: o.gpu_s for o in r.outcomes}
    assert charged == pytest.approx({1: 72.0, 2: 48.0 + 100.0 / 3})
    assert sum(charged.values()) == pytest.approx(120.0 + 100.0 / 3)


def test_arrival_between_rounds_waits_for_the_round() -> None:
    # A arrives at 5 on an idle cluster: nothing starts before the round at 60 -> ends 60 + 30.
    r = simulate([job(1, 5, 30)], one_gpu(), FIFO, FakeProfile())
    assert ends(r) == {1: 90.0}
    assert r.outcomes[0].queue_s == 55.0


def test_sjf_runs_the_short_job_first() -> None:
    # Both at t=0 on one GPU. SJF: B (50 s) 0..50, A (100 s) from the round at 60 -> 160.
    # Mean JCT (50 + 160) / 2 = 105. FIFO: A 0..100, B 120..170 -> mean (100 + 170) / 2 = 135.
    jobs = [job(1, 0, 100), job(2, 0, 50)]
    sjf = simulate(jobs, one_gpu(), SJF, FakeProfile())
    fifo = simulate(jobs, one_gpu(), FIFO, FakeProfile())
    assert ends(sjf) == {1: 160.0, 2: 50.0}
    assert metrics.mean(o.jct_s for o in sjf.outcomes) == 105.0
    assert metrics.mean(o.jct_s for o in fifo.outcomes) == 135.0


def test_shared_pair_slows_both_until_one_ends() -> None:
    # A (100 it x 1 s) and B (60 it x 1 s) share GPU 0 from t=0 with xi_A = 1.5, xi_B = 1.2.
    # B needs 60 x 1.2 = 72 s -> ends 72. A did 72 / 1.5 = 48 it, 52 left alone -> ends 124.
    profile = FakeProfile(xi={("a", "b"): (1.5, 1.2)})
    a, b = job(1, 0, 100, model="a"), job(2, 0, 60, model="b")
    policy = Scripted({0.0: RoundDecisions("scripted", 0.0, (Start(1, (0,), 8, 1), Start(2, (0,), 8, 1)))})
    r = simulate([a, b], one_gpu(), policy, profile)
    assert ends(r) == pytest.approx({1: 124.0, 2: 72.0})
    # Accounting by normalised progress (FAIRNESS.md): A pays xi_B / (xi_A + xi_B) = 1.2 / 2.7 = 4/9
    # of each shared GPU-second, B 5/9: A 72 x 4/9 + 52 = 32 + 52 = 84, B 72 x 5/9 = 40;
    # together 124 GPU-s = the busy GPU-time (invariant 7, TESTING.md).
    charged = {o.job_id: o.gpu_s for o in r.outcomes}
    assert charged == pytest.approx({1: 84.0, 2: 40.0})
    util, shared = metrics.utilisation(r.timeline, 1, 0.0, 124.0)
    assert util == pytest.approx(1.0)
    assert shared == pytest.approx(72.0 / 124.0)
    # Time-weighted xi while shared: (1.5 x 72 + 1.2 x 72) / 144 = 1.35.
    assert r.mean_shared_slowdown == pytest.approx(1.35)


def test_gang_runs_at_the_pace_of_its_slowest_gpu() -> None:
    # A: 2 GPUs, 100 it x 1 s; B shares only GPU 1 with xi_A = 2.0, xi_B = 1.25, 40 it x 1 s.
    # B ends at 40 x 1.25 = 50; A did 50 / 2 = 25 it there, 75 left -> ends 125.
    profile = FakeProfile(xi={("a", "b"): (2.0, 1.25)})
    a, b = job(1, 0, 100, model="a", gpus=2), job(2, 0, 40, model="b")
    policy = Scripted({0.0: RoundDecisions("scripted", 0.0, (Start(1, (0, 1), 8, 1), Start(2, (1,), 8, 1)))})
    r = simulate([a, b], Cluster.uniform(1, 2), policy, profile)
    assert ends(r) == pytest.approx({1: 125.0, 2: 50.0})


def test_sub_batch_sets_the_iteration_time() -> None:
    # The fake profile doubles t_j(b) for b < B: 10 it x 2 s = 20 s.
    policy = Scripted({0.0: RoundDecisions("scripted", 0.0, (Start(1, (0,), 4, 2),))})
    assert ends(simulate([job(1, 0, 10)], one_gpu(), policy, FakeProfile())) == {1: 20.0}


def test_preemption_keeps_progress_and_pays_the_restart_cost() -> None:
    # A (100 it x 1 s) runs from 0; at 60 it is preempted (60 it done) for B (30 it, arrived 30):
    # B runs 60..90. A restarts at the round at 120, makes no progress for 30 s, then needs 40 s
    # -> ends 190; JCT 190; queueing 120 - 60 = 60 s. B: JCT 90 - 30 = 60, queueing 30 s.
    script = {
        0.0: RoundDecisions("scripted", 0.0, (Start(1, (0,), 8, 1),)),
        60.0: RoundDecisions("scripted", 60.0, (Start(2, (0,), 8, 1),), (Preempt(1, "shorter job"),)),
        120.0: RoundDecisions("scripted", 120.0, (Start(1, (0,), 8, 1),)),
    }
    policy = Scripted(script)
    r = simulate([job(1, 0, 100), job(2, 30, 30)], one_gpu(), policy, FakeProfile())
    assert ends(r) == {1: 190.0, 2: 90.0}
    by_id = {o.job_id: o for o in r.outcomes}
    assert (by_id[1].queue_s, by_id[1].preemptions, by_id[2].queue_s) == (60.0, 1, 30.0)
    assert r.preemptions == 1
    # The snapshot of the round at 120 shows A pending with its progress kept: 60 it, 60 GPU-s.
    pending = {j.id: j for j in policy.calls[2].pending}
    a = pending[1]
    assert (a.iterations_done, a.attained_gpu_s, a.queued_since) == (60.0, 60.0, 60.0)
    # With restart cost 0 A would end at 160.
    r0 = simulate(
        [job(1, 0, 100), job(2, 30, 30)],
        one_gpu(),
        Scripted(script),
        FakeProfile(),
        SimConfig(restart_cost_s=0),
    )
    assert ends(r0)[1] == 160.0


def test_snapshot_shows_running_progress_and_reuses_pending_jobs() -> None:
    # A (2 GPUs, 100 it x 2 s) runs from 0; at the round at 60 it has done 30 it and 120 GPU-s.
    policy = Scripted({0.0: RoundDecisions("scripted", 0.0, (Start(1, (0, 1), 8, 1),))})
    c = job(3, 0, 10, gpus=4)
    simulate([job(1, 0, 100, iter_s=2.0, gpus=2), c], Cluster.uniform(1, 2), policy, FakeProfile())
    snap = policy.calls[1]
    assert snap.now == 60.0
    running = snap.running[0].job
    assert (running.iterations_done, running.attained_gpu_s) == (30.0, 120.0)
    assert snap.pending[0] is c  # pending jobs are passed as they are, not rebuilt


@pytest.mark.parametrize(
    ("starts", "message"),
    [
        ((Start(1, (0,), 8, 1), Start(2, (0,), 8, 1), Start(3, (0,), 8, 1)), "already holds 2"),
        ((Start(1, (0, 0), 8, 1),), "distinct"),
        ((Start(1, (5,), 8, 1),), "does not exist"),
        ((Start(9, (0,), 8, 1),), "unknown job"),
        ((Start(1, (0,), 3, 1),), "does not divide"),
    ],
)
def test_impossible_decisions_raise(starts: tuple[Start, ...], message: str) -> None:
    profile = FakeProfile(xi={("m", "m"): (1.1, 1.1)})
    policy = Scripted({0.0: RoundDecisions("scripted", 0.0, starts)})
    with pytest.raises(SimulationError, match=message):
        simulate([job(1, 0, 10), job(2, 0, 10), job(3, 0, 10)], one_gpu(), policy, profile)


def test_sharing_beyond_gpu_memory_raises() -> None:
    # Two jobs of 30,000 MB on a 49,140 MB GPU: 60,000 MB does not fit.
    profile = FakeProfile(xi={("m", "m"): (1.1, 1.1)}, mem_mb=30_000)
    policy = Scripted({0.0: RoundDecisions("scripted", 0.0, (Start(1, (0,), 8, 1), Start(2, (0,), 8, 1)))})
    with pytest.raises(SimulationError, match="exceeds"):
        simulate([job(1, 0, 10), job(2, 0, 10)], one_gpu(), policy, profile)


def test_preempting_a_pending_job_raises() -> None:
    policy = Scripted({0.0: RoundDecisions("scripted", 0.0, (), (Preempt(1, "x"),))})
    with pytest.raises(SimulationError, match="not running"):
        simulate([job(1, 0, 10)], one_gpu(), policy, FakeProfile())


def test_job_that_never_fits_is_reported_unfinished() -> None:
    # A 2-GPU gang on a 1-GPU cluster: the policy can never start it; the run still ends.
    r = simulate([job(1, 0, 10), job(2, 0, 10, gpus=2)], one_gpu(), FIFO, FakeProfile())
    assert ends(r) == {1: 10.0}
    assert r.unfinished == (2,)


def _random_trace(n: int, seed: int) -> list[Job]:
    import random

    rng = random.Random(seed)
    return [
        job(
            i,
            rng.choice([0, 0, 5, 37, 61, 130, 400]) + rng.random() * 300,
            rng.randint(5, 400),
            iter_s=rng.choice([0.5, 1.0, 2.0]),
            gpus=rng.choice([1, 1, 1, 2, 4]),
            model=rng.choice("ab"),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("policy", [FIFO, SJF], ids=lambda p: p.name)
@pytest.mark.parametrize("on_events", [False, True])
def test_skipping_idle_rounds_changes_nothing(policy: Greedy, on_events: bool) -> None:
    jobs = _random_trace(60, seed=7)
    cluster = Cluster.uniform(2, 4)
    fast = simulate(jobs, cluster, policy, FakeProfile(), SimConfig(round_on_events=on_events))
    slow = simulate(
        jobs, cluster, policy, FakeProfile(), SimConfig(round_on_events=on_events, skip_idle_rounds=False)
    )
    assert fast.outcomes == slow.outcomes
    assert fast.timeline == slow.timeline
    assert fast.rounds < slow.rounds  # the skipping did skip something


def test_same_inputs_same_result() -> None:
    jobs = _random_trace(40, seed=3)
    runs = [simulate(jobs, Cluster.uniform(1, 4), SJF, FakeProfile(), SimConfig(seed=5)) for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0].seed == 5
    assert len(runs[0].outcomes) == 40


def test_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="round interval"):
        SimConfig(round_interval_s=0)
    with pytest.raises(ValueError, match="restart cost"):
        SimConfig(restart_cost_s=-1)
    assert math.isclose(SimConfig().restart_cost_s, 30.0)


# ----------------------------------------------------------------- the registered policies
# A: t=0, 100 it x 1 s; B: t=30, 30 it x 1 s; one GPU; a shared pair slows both by xi = 2.
#  fifo, sjf, tiresias (both in the high queue, FIFO inside it), sjf-bsbf: A 0..100, B starts at
#    the round at 120 -> 150. sjf-bsbf declines to share at 60: resident A has B = 40 s left,
#    incoming B has A = 30 s; xi·A = 60 < xi·B = 80 so B would end first and
#    T_con = 40/2 + (1 - 1/4)·2·30 = 65 > T_seq = 40 + 30/2 = 55 (MODEL.md §2).
#  srtf: at 60 A has 40 s left > B's 30 s -> A preempted, B runs 60..90; A restarts at 120,
#    pays 30 s, needs 40 s -> 190.
#  sjf-ffs: B joins A at 60; A's 40 it take 80 s, B's 30 it take 60 s -> B ends 120; A did 30 it
#    in those 60 s, 10 left alone -> 130.
EXPECTED_ENDS = {
    "fifo": {1: 100.0, 2: 150.0},
    "sjf": {1: 100.0, 2: 150.0},
    "tiresias": {1: 100.0, 2: 150.0},
    "sjf-bsbf": {1: 100.0, 2: 150.0},
    "srtf": {1: 190.0, 2: 90.0},
    "sjf-ffs": {1: 130.0, 2: 120.0},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_ENDS))
def test_registered_policies_by_hand(name: str) -> None:
    from scheduling.core.policies import get_policy

    profile = FakeProfile(xi={("a", "b"): (2.0, 2.0)})
    jobs = [job(1, 0, 100, model="a"), job(2, 30, 30, model="b")]
    r = simulate(jobs, one_gpu(), get_policy(name), profile)
    assert ends(r) == pytest.approx(EXPECTED_ENDS[name])


def test_sjf_bsbf_shares_when_it_pays() -> None:
    # Same trace with xi = 1.2: xi·A = 36 < xi·B = 48, T_con = 20 + (1 - 1/2.4)·1.2·30 = 41 < 55:
    # B joins A at 60, its 30 it take 36 s -> ends 96; A did 30 it meanwhile, 10 left -> 106.
    from scheduling.core.policies import get_policy

    profile = FakeProfile(xi={("a", "b"): (1.2, 1.2)})
    r = simulate(
        [job(1, 0, 100, model="a"), job(2, 30, 30, model="b")], one_gpu(), get_policy("sjf-bsbf"), profile
    )
    assert ends(r) == pytest.approx({1: 106.0, 2: 96.0})


def test_tiresias_demotes_after_3200_gpu_seconds() -> None:
    # A: t=0, 5000 it x 1 s; B: t=10, 100 it. A is ahead (same queue, earlier) until it has
    # 3200 GPU-s; the first round after that, 3240, preempts it for B (3240..3340). A restarts at
    # the round at 3360, pays 30 s, has 1760 it left -> ends 3390 + 1760 = 5150.
    from scheduling.core.policies import get_policy

    r = simulate([job(1, 0, 5000), job(2, 10, 100)], one_gpu(), get_policy("tiresias"), FakeProfile())
    assert ends(r) == {1: 5150.0, 2: 3340.0}
    assert r.preemptions == 1


def test_tiresias_horizon() -> None:
    from scheduling.core.policies.tiresias import tiresias_horizon
    from scheduling.core.types import Placement, RunningJob, Snapshot

    # Running: 3000 GPU-s on 2 GPUs crosses 3200 after 100 s; pending low-queue job with 4000 GPU-s
    # on 1 GPU, waiting since 500: promoted after 500 + 4000 = 4500 s. 1 µs early.
    low = Job(3, "t", "m", 8, 1, 10, 0.0, 1.0, attained_gpu_s=4000.0, queued_since=500.0)

    def at(attained: float) -> Snapshot:
        r = Job(1, "t", "m", 8, 2, 10, 0.0, 1.0, attained_gpu_s=attained)
        return Snapshot(1000.0, Cluster.uniform(1, 4), (low,), (RunningJob(r, Placement(1, (0, 1), 8, 0.0)),))

    assert tiresias_horizon(at(3000.0)) == pytest.approx(1100.0 - 1e-6, abs=1e-9)
    assert tiresias_horizon(at(5000.0)) == pytest.approx(4500.0 - 1e-6, abs=1e-9)
    assert tiresias_horizon(Snapshot(1000.0, Cluster.uniform(1, 4), (), ())) == math.inf


@pytest.mark.parametrize("on_events", [False, True])
@pytest.mark.parametrize("name", ["fifo", "sjf", "srtf", "tiresias", "sjf-ffs", "sjf-bsbf", "sjf-bsbf-fair"])
def test_skipping_changes_nothing_with_registered_policies(name: str, on_events: bool) -> None:
    from scheduling.core.policies import get_policy

    jobs = _random_trace(80, seed=11)
    profile = FakeProfile(
        xi={("a", "b"): (1.3, 1.6), ("a", "a"): (1.4, 1.4), ("b", "b"): (2.5, 2.5)}, mem_mb=15_000
    )
    cluster = Cluster.uniform(2, 4)
    fast = simulate(jobs, cluster, get_policy(name), profile, SimConfig(round_on_events=on_events))
    slow = simulate(
        jobs, cluster, get_policy(name), profile, SimConfig(round_on_events=on_events, skip_idle_rounds=False)
    )
    assert fast.outcomes == slow.outcomes
    assert fast.timeline == slow.timeline
    assert len(fast.outcomes) == 80


@pytest.mark.parametrize("reclaim", ["preempt", "bound", "both"])
@pytest.mark.parametrize("name", ["fifo", "sjf-bsbf", "sjf-bsbf-fair"])
def test_skipping_changes_nothing_with_tenant_quotas(name: str, reclaim: str) -> None:
    # Three tenants with guarantees 4/2/2 of 8 GPUs, a short starvation bound and aging so that
    # time-driven reordering happens within the trace: skipping must still change nothing.
    from scheduling.core.policies import get_policy
    from scheduling.core.types import SchedulerConfig, TenantQuota

    jobs = [replace(j, tenant="abc"[j.id % 3]) for j in _random_trace(80, seed=5)]
    profile = FakeProfile(
        xi={("a", "b"): (1.3, 1.6), ("a", "a"): (1.4, 1.4), ("b", "b"): (2.5, 2.5)}, mem_mb=15_000
    )
    quotas = {"a": TenantQuota(4), "b": TenantQuota(2, 2), "c": TenantQuota(2)}
    scheduler = SchedulerConfig(
        starvation_bound_s=600.0, aging_s=300.0, reclaim=reclaim, borrow_bound_s=200.0
    )
    config = SimConfig(scheduler=scheduler, tenant_quotas=quotas)
    cluster = Cluster.uniform(2, 4)
    fast = simulate(jobs, cluster, get_policy(name), profile, config)
    slow = simulate(jobs, cluster, get_policy(name), profile, replace(config, skip_idle_rounds=False))
    assert fast.outcomes == slow.outcomes
    assert fast.timeline == slow.timeline
    assert len(fast.outcomes) == 80


@pytest.mark.shared_data
@pytest.mark.parametrize("name", ["fifo", "sjf", "srtf", "tiresias", "sjf-ffs", "sjf-bsbf", "sjf-bsbf-fair"])
def test_skipping_changes_nothing_on_the_testbed_trace(shared_data, name: str) -> None:
    from scheduling.core.policies import get_policy
    from scheduling.profiles import load_default_profile
    from scheduling.sim.loaders import load_traces

    trace = load_traces(shared_data / "traces" / "sjfbsbf-testbed-61.csv")
    cluster = Cluster.uniform(4, 8)
    profile = load_default_profile()
    fast = simulate(trace.jobs, cluster, get_policy(name), profile)
    slow = simulate(trace.jobs, cluster, get_policy(name), profile, SimConfig(skip_idle_rounds=False))
    assert fast.outcomes == slow.outcomes
    assert len(fast.outcomes) == 61 and fast.unfinished == ()


# ------------------------------------------------------------------------------ metrics
def test_percentile_linear_interpolation() -> None:
    # [10, 20, 30, 40]: p50 rank 1.5 -> 25; p95 rank 2.85 -> 30 + 0.85 x 10 = 38.5; p0/p100 = ends.
    values = [40.0, 10.0, 30.0, 20.0]
    assert metrics.percentile(values, 50) == 25.0
    assert metrics.percentile(values, 95) == pytest.approx(38.5)
    assert (metrics.percentile(values, 0), metrics.percentile(values, 100)) == (10.0, 40.0)
    with pytest.raises(ValueError):
        metrics.percentile([], 50)
    with pytest.raises(ValueError):
        metrics.percentile(values, 101)


def test_jain_index() -> None:
    # (1+1+1+1)^2 / (4 x 4) = 1; (4+0+0+0)^2 / (4 x 16) = 1/4; (1+3)^2 / (2 x 10) = 0.8.
    assert metrics.jain_index([1, 1, 1, 1]) == 1.0
    assert metrics.jain_index([4, 0, 0, 0]) == 0.25
    assert metrics.jain_index([1, 3]) == pytest.approx(0.8)
    assert math.isnan(metrics.jain_index([]))
    with pytest.raises(ValueError):
        metrics.jain_index([-1, 2])


def test_jain_index_of_values_past_the_float_squares() -> None:
    # 1e200 squared is past the float range; the index is scale-free: [1, 1] -> 1, [1, 3] -> 0.8.
    assert metrics.jain_index([1e200, 1e200]) == 1.0
    assert metrics.jain_index([1e300, 3e300]) == pytest.approx(0.8)
    assert math.isnan(metrics.jain_index([math.inf, 1.0]))


def test_metrics_of_the_largest_legal_jobs_stay_finite() -> None:
    # The loaders' bounds: a gang of every GPU there may be, running ten years from a ten-year
    # submit time. 10,000 such tenants hold 1e5 GPUs x 2 x 315,360,000 s / 3600 GPU-hours each.
    from common.limits import MAX_TRACE_TIME_S
    from common.shapes import MAX_TOTAL_GPUS
    from scheduling.sim.quotas import proportional_quotas

    gpu_hours = MAX_TOTAL_GPUS * 2 * MAX_TRACE_TIME_S / 3600
    assert metrics.jain_index([gpu_hours] * 10_000) == pytest.approx(1.0)
    assert metrics.jain_index([gpu_hours, 3 * gpu_hours]) == pytest.approx(0.8)
    demand = {f"t{i}": MAX_TOTAL_GPUS * MAX_TRACE_TIME_S * 1000 for i in range(4)}
    quotas = proportional_quotas(demand, MAX_TOTAL_GPUS)
    assert [q.guaranteed_gpus for q in quotas.values()] == [25_000] * 4


def test_proportional_quotas_of_weights_past_the_float_range() -> None:
    from scheduling.sim.quotas import proportional_quotas

    # 8 x 1e308 overflows; the shares are those of equal weights: 4 and 4.
    quotas = proportional_quotas({"a": 1e308, "b": 1e308}, 8)
    assert {t: q.guaranteed_gpus for t, q in quotas.items()} == {"a": 4, "b": 4}
    with pytest.raises(ValueError, match="finite"):
        proportional_quotas({"a": math.inf, "b": 1.0}, 8)


def test_summarise_and_binned_utilisation() -> None:
    # Two jobs on a 2-GPU cluster: one GPU busy 0..10, both 10..20 (one of them shared 10..15).
    outcomes = [
        metrics.JobOutcome(1, "x", 1, 0.0, 0.0, 20.0, 0.0, 17.5, 5.0),
        metrics.JobOutcome(2, "y", 1, 5.0, 10.0, 20.0, 5.0, 7.5, 5.0),
    ]
    timeline = [(0.0, 1, 0), (10.0, 2, 1), (15.0, 2, 0), (20.0, 0, 0)]
    s = metrics.summarise(outcomes, timeline, 2)
    # JCTs 20 and 15; makespan 20 - 0; busy 10 + 20 = 30 GPU-s of 40 -> 0.75; shared 5 / 30.
    assert (s["avg_jct_s"], s["makespan_s"], s["avg_queue_s"]) == (17.5, 20.0, 2.5)
    assert s["gpu_util"] == 0.75
    assert s["shared_gpu_time_frac"] == pytest.approx(5 / 30)
    assert s["per_tenant"]["x"] == {"jobs": 1, "avg_jct_s": 20.0, "gpu_hours": pytest.approx(17.5 / 3600)}
    # Jain over GPU-hours 17.5 and 7.5 (/3600): 25^2 / (2 x (306.25 + 56.25)) = 625 / 725.
    assert s["jain_gpu_hours"] == pytest.approx(625 / 725)
    times, util = metrics.binned_utilisation(timeline, 2, 0.0, 20.0, bins=4)
    assert times == [0.0, 5.0, 10.0, 15.0]
    assert util == [0.5, 0.5, 1.0, 1.0]
    xs, ys = metrics.cdf_points([3.0, 1.0, 2.0, 4.0], max_points=2)
    assert (xs, ys) == ([2.0, 4.0], [0.5, 1.0])
