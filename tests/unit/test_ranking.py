"""Rounds that cost what changed (issue 16 item 1): the pending ranking kept between rounds gives
exactly the from-scratch decisions — checked on random sequences of pending sets and on random
traces, round by round and end to end."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduling.core.policies.sjf import SrtfPolicy
from scheduling.core.policies.tiresias import TiresiasPolicy, pending_key, pending_key_valid_until
from scheduling.core.ranking import PendingRanking, common_run
from scheduling.core.rounds import sjf_key
from scheduling.core.types import (
    Cluster,
    Job,
    Profile,
    RoundDecisions,
    SchedulerConfig,
    Snapshot,
    TenantQuota,
    TiresiasConfig,
)
from scheduling.sim.engine import SimConfig, simulate
from tests.unit.fakes import FakeProfile, job


def test_common_run_counts_equal_prefixes() -> None:
    a = [job(i) for i in range(300)]
    assert common_run(a, 0, a, 0) == 300
    assert common_run(a, 0, a[:150] + a[151:], 0) == 150
    assert common_run(a, 151, a[:150] + a[151:], 150) == 149
    assert common_run(a, 0, [replace(a[0])] + a[1:5], 0) == 5  # an equal job counts as the same
    assert common_run(a, 0, [], 0) == 0


def _scratch(pending: list[Job], now: float, key) -> list[tuple]:
    return sorted(key(j, now) for j in pending)


@pytest.mark.parametrize("seed", range(6))
def test_pending_ranking_equals_the_sorted_pending_jobs(seed: int) -> None:
    # Random rounds: arrivals appended, starts removed (told or not), preempted jobs back with
    # new progress, equal copies handed over, time passing Tiresias' starvation instants.
    rng = random.Random(seed)
    config = TiresiasConfig(thresholds=(50.0, 400.0))
    ranking = PendingRanking(
        lambda j, now: pending_key(j, now, config), lambda j, now: pending_key_valid_until(j, now, config)
    )
    pending: list[Job] = []
    next_id, now = 0, 0.0
    for _ in range(120):
        now += rng.choice([0.0, 1.0, 7.0, 60.0])
        started = {j.id for j in rng.sample(pending, min(len(pending), rng.randint(0, 3)))}
        pending = [j for j in pending if j.id not in started]
        for _ in range(rng.randint(0, 4)):
            attained = rng.choice([0.0, 0.0, 30.0, 100.0, 900.0])
            pending.append(job(next_id, submit=now - rng.random() * 50, attained=attained, queued_since=now))
            next_id += 1
        if pending and rng.random() < 0.3:  # a changed job (new progress) in place
            i = rng.randrange(len(pending))
            pending[i] = replace(pending[i], attained_gpu_s=pending[i].attained_gpu_s + 500.0)
        if rng.random() < 0.2:  # the service hands equal copies
            pending = [replace(j) for j in pending]
        if rng.random() < 0.5:
            ranking.started(started if rng.random() < 0.8 else {next_id + 99})  # a hint, maybe wrong
        keys, jobs = ranking.update(tuple(pending), now)
        expected = _scratch(pending, now, lambda j, t: pending_key(j, t, config))
        assert keys == expected
        assert [pending_key(j, now, config) for j in jobs] == expected


class Both:
    """Runs the incremental policy and a from-scratch one on every snapshot; they must agree."""

    def __init__(self, fast, scratch_cls) -> None:
        self.fast, self.scratch_cls = fast, scratch_cls
        self.name, self.preemptive = fast.name, True
        self.skip_rule = replace(fast.skip_rule, horizon=self.horizon)
        self.rounds = 0

    def horizon(self, snapshot: Snapshot) -> float:
        got = (
            self.fast.horizon(snapshot)
            if hasattr(self.fast, "horizon")
            else self.fast.skip_rule.horizon(snapshot)
        )
        assert got == self.scratch_cls(incremental=False).skip_rule.horizon(snapshot)
        return got

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        got = self.fast.decide(snapshot, profile, explain=explain)
        assert got == self.scratch_cls(incremental=False).decide(snapshot, profile, explain=explain)
        self.rounds += 1
        return got


def _trace(n: int, seed: int) -> list[Job]:
    rng = random.Random(seed)
    return [
        job(
            i,
            gpus=rng.choice([1, 1, 1, 2, 4, 8]),
            iterations=rng.randint(20, 3000),
            iter_time_s=rng.choice([0.5, 1.0, 2.0]),
            submit=rng.random() * 20_000,
            tenant="ab"[i % 2],
        )
        for i in range(n)
    ]


CONFIGS = [
    TiresiasConfig(),
    TiresiasConfig(thresholds=(400.0, 3_000.0), starvation_guard=False),
    TiresiasConfig(thresholds=(300.0,), service="wall_s", starvation_factor=0.5),
]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("tiresias", CONFIGS, ids=["ours", "three-queues-no-guard", "wall-time"])
@pytest.mark.parametrize("placement", ["spread", "consolidated"])
def test_incremental_tiresias_decides_as_from_scratch(
    seed: int, tiresias: TiresiasConfig, placement: str
) -> None:
    jobs = _trace(150, seed)
    config = SimConfig(scheduler=SchedulerConfig(placement=placement, tiresias=tiresias))
    both = Both(TiresiasPolicy(), TiresiasPolicy)
    fast = simulate(jobs, Cluster.uniform(2, 8), both, FakeProfile(), config)
    scratch = simulate(jobs, Cluster.uniform(2, 8), TiresiasPolicy(incremental=False), FakeProfile(), config)
    assert fast == scratch
    assert both.rounds > 100 and len(fast.outcomes) == 150


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("quotas", [False, True])
def test_incremental_srtf_decides_as_from_scratch(seed: int, quotas: bool) -> None:
    jobs = _trace(150, seed)
    config = SimConfig(tenant_quotas={"a": TenantQuota(10), "b": TenantQuota(6)} if quotas else {})
    both = Both(SrtfPolicy(), SrtfPolicy)
    fast = simulate(jobs, Cluster.uniform(2, 8), both, FakeProfile(), config)
    scratch = simulate(jobs, Cluster.uniform(2, 8), SrtfPolicy(incremental=False), FakeProfile(), config)
    assert fast == scratch
    assert both.rounds > 50


def test_srtf_ranking_key_is_sjf_key() -> None:
    pending = [job(i, iterations=10 * (5 - i), submit=float(i)) for i in range(5)]
    ranking = PendingRanking(lambda j, now: sjf_key(j))
    keys, jobs = ranking.update(tuple(pending), 0.0)
    assert [j.id for j in jobs] == [4, 3, 2, 1, 0] and keys == sorted(keys)


def test_a_job_said_started_but_pending_again_is_ranked_once_by_its_new_key() -> None:
    # A job told started may be pending again next round (a start the service could not
    # dispatch, or one that ran a little): it must be ranked once, by its current key. Keys are
    # (P_j, submit, id), P_j = remaining iterations × 1 s: 10, 20, 30 s; job 0 back with 8 done
    # (P = 2 s) behind a new arrival of P = 5 s.
    jobs = [job(i, iterations=it, submit=float(i)) for i, it in enumerate([10, 20, 30])]
    ranking = PendingRanking(lambda j, now: sjf_key(j))
    ranking.update(tuple(jobs), 0.0)
    ranking.started({0})
    back = job(0, iterations=10, done=8, submit=0.0)
    arrival = job(3, iterations=5, submit=3.0)
    keys, ranked = ranking.update((jobs[1], arrival, jobs[2], back), 60.0)
    assert keys == [(2.0, 0.0, 0), (5.0, 3.0, 3), (20.0, 1.0, 1), (30.0, 2.0, 2)]
    assert ranked[0] is back and [j.id for j in ranked] == [0, 3, 1, 2]


@pytest.mark.parametrize("seed", range(4))
def test_timeless_ranking_equals_the_sorted_pending_jobs(seed: int) -> None:
    # PendingRanking.timeless(sjf_key) sorts a new queue with its own key path (no call per job
    # of ours, the entries built in one pass): every update must still be the from-scratch sort,
    # and a reset (time going back) sorts again by that path
    rng = random.Random(seed)
    ranking = PendingRanking.timeless(sjf_key)
    pending: list[Job] = []
    next_id, now = 0, 0.0
    for step in range(80):
        now = 0.0 if step == 40 else now + rng.choice([0.0, 1.0, 60.0])
        started = {j.id for j in rng.sample(pending, min(len(pending), rng.randint(0, 3)))}
        pending = [j for j in pending if j.id not in started]
        for _ in range(rng.randint(0, 5)):
            pending.append(job(next_id, iterations=rng.randint(1, 50), submit=rng.choice([0.0, 1.0, now])))
            next_id += 1
        if pending and rng.random() < 0.3:  # new progress in place
            i = rng.randrange(len(pending))
            pending[i] = replace(pending[i], iterations_done=pending[i].iterations_done + 1)
        ranking.started(started)
        keys, jobs = ranking.update(tuple(pending), now)
        assert keys == sorted(sjf_key(j) for j in pending)
        assert [sjf_key(j) for j in jobs] == keys
    # by hand: P_j = iterations × 1 s; ties on P_j go to the earlier submission, then the id
    first = PendingRanking.timeless(sjf_key)
    three = (job(7, iterations=5, submit=2.0), job(3, iterations=5, submit=1.0), job(1, iterations=9))
    assert first.update(three, 0.0) == (
        [(5.0, 1.0, 3), (5.0, 2.0, 7), (9.0, 0.0, 1)],
        [three[1], three[0], three[2]],
    )
