"""The simulator's per-round fast paths give the results of the plain computation.

Shortcuts of :class:`scheduling.sim.engine.Simulator` (docs/PERFORMANCE.md §5): a relaunch
re-files a job's completion at its unchanged rate instead of recomputing its slowdown and charge;
a re-plan that relaunches every running job does so in one loop
(:func:`scheduling.sim.relaunch.relaunch_all`) and rebuilds the event heap from their new events
alone; the second snapshot of a round reuses the running jobs' views of the first at the same
instant. A subclass that recomputes everything (every relaunch advanced, charged and rescheduled
one call at a time, every event pushed, every view rebuilt) is the reference; random traces under
the peers' presets, which relaunch every running job at every round (also with a restart cost
and overheads that differ by model and gang), and our defaults, with preemptive and sharing
policies, must give equal results, bit for bit.

The queue lists of Tiresias (``demoted="back"``) build their ranking by slicing around the
running jobs, detect gone jobs by counting, and leave a list whose running jobs are its head
already as it is; :class:`FromScratchLists` (the lists as they were: every list walked, every
touched list rebuilt) is their reference, round by round.
"""

from __future__ import annotations

import math
import operator
import random
from bisect import bisect_right
from dataclasses import replace
from itertools import chain, compress, filterfalse

import pytest

from scheduling.core.policies import get_policy
from scheduling.core.policies.tiresias_lists import TiresiasLists
from scheduling.core.preemptive import preemptive_exclusive
from scheduling.core.skip import SkipRule
from scheduling.core.types import (
    Cluster,
    Job,
    Profile,
    RoundDecisions,
    SchedulerConfig,
    Snapshot,
    TiresiasConfig,
)
from scheduling.sim.engine import SimConfig, SimResult, Simulator
from scheduling.sim.fidelity import OverheadTable
from scheduling.sim.job_state import with_progress
from scheduling.sim.presets import PRESETS
from tests.unit.fakes import FakeProfile, job


class PlainSimulator(Simulator):
    """The reference: no relaunch shortcut, no reused views."""

    def _relaunch(self, now: float, started: set[int], before: bool) -> None:
        fid = self.config.fidelity
        if fid.replans(before, self._since_due or self._change <= now):
            for jid in self._running:
                if jid not in started:
                    s = self._states[jid]
                    self._advance(s, now)
                    fid.relaunch_job(s, now)
                    self._reschedule(s, now)  # ξ and the charge recomputed, then the event pushed

    def _snapshot(self, now: float):  # type: ignore[no-untyped-def]
        self._views = {}  # nothing to reuse: every view is rebuilt
        return super()._snapshot(now)

    def _next_horizon_round(self, now: float, unchanged=None) -> float:  # type: ignore[no-untyped-def]
        return super()._next_horizon_round(now)  # the horizon's snapshot always rebuilt


# overheads that differ by model and gang size, a restart cost: progress clamped at the mark
VARIED = OverheadTable("varied", by_model={"m": 3.0, "n": 45.0}, by_gang={4: {"m": 12.0}}, default_s=7.0)


def config_for(preset: str | None) -> SimConfig:
    if preset is None:
        return SimConfig()
    if preset == "muri-sim-varied":
        config = PRESETS["muri-sim"].sim_config()
        fidelity = replace(config.fidelity, first_start=VARIED, relaunch=VARIED)
        return replace(config, restart_cost_s=30.0, fidelity=fidelity)
    return PRESETS[preset].sim_config()


def trace(seed: int, *, aligned: bool = False) -> list[Job]:
    """40 random jobs; ``aligned``: submit times and lengths on 100 s steps, so that arrivals
    and completions often fall on one instant."""
    rng = random.Random(seed)
    return [
        job(
            i,
            gpus=rng.choice((1, 1, 2, 4, 8)),
            model=rng.choice(("m", "n")),
            iterations=rng.randint(1, 30) * 100 if aligned else rng.randint(20, 3_000),
            iter_time_s=1.0 if aligned else rng.choice((0.5, 1.0, 2.0)),
            submit=rng.randint(0, 40) * 100.0 if aligned else rng.uniform(0, 4_000),
        )
        for i in range(40)
    ]


def outcomes(result: SimResult) -> list:
    return sorted(result.outcomes, key=lambda o: o.job_id)


def assert_same(fast: SimResult, plain: SimResult) -> None:
    assert outcomes(fast) == outcomes(plain)
    assert fast.unfinished == plain.unfinished
    assert fast.timeline == plain.timeline
    assert (fast.rounds, fast.preemptions) == (plain.rounds, plain.preemptions)
    slow_fast, slow_plain = fast.mean_shared_slowdown, plain.mean_shared_slowdown
    assert slow_fast == slow_plain or (math.isnan(slow_fast) and math.isnan(slow_plain))


@pytest.mark.parametrize("preset", ["muri-sim", "muri-sim-varied", "muri-testbed", None])
@pytest.mark.parametrize("policy", ["srtf", "tiresias", "sjf-bsbf"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_paths_equal_the_plain_computation(preset: str | None, policy: str, seed: int) -> None:
    config = config_for(preset)
    cluster = Cluster.uniform(2, 4)
    jobs = trace(seed)
    fast = Simulator(jobs, cluster, get_policy(policy), FakeProfile(), config).run()
    plain = PlainSimulator(jobs, cluster, get_policy(policy), FakeProfile(), config).run()
    assert_same(fast, plain)
    assert len(fast.outcomes) == len(jobs)


class Recording:
    """A policy that records every snapshot it is shown (decisions, and the horizon's)."""

    def __init__(self, name: str) -> None:
        self.inner = get_policy(name)
        self.name, self.preemptive = self.inner.name, self.inner.preemptive
        rule = self.inner.skip_rule
        self.skip_rule = SkipRule(rule.capacity, rule.shares, None if rule.horizon is None else self.horizon)
        self.seen: list[tuple[float, tuple, tuple]] = []

    def horizon(self, snapshot: Snapshot) -> float:
        self.seen.append((snapshot.now, snapshot.running, snapshot.pending))
        return self.inner.skip_rule.horizon(snapshot)

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        self.seen.append((snapshot.now, snapshot.running, snapshot.pending))
        return self.inner.decide(snapshot, profile, explain=explain)


@pytest.mark.parametrize("preset", ["muri-sim", "muri-sim-varied", "muri-testbed"])
@pytest.mark.parametrize("policy", ["srtf", "tiresias"])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_snapshot_equals_the_plain_one(preset: str, policy: str, seed: int) -> None:
    """The running jobs' views (made by the relaunch, or reused within a round) and the pending
    jobs of every snapshot equal those built from scratch, every float to the bit."""
    config = config_for(preset)
    fast, plain = Recording(policy), Recording(policy)
    Simulator(trace(seed), Cluster.uniform(2, 4), fast, FakeProfile(), config).run()
    PlainSimulator(trace(seed), Cluster.uniform(2, 4), plain, FakeProfile(), config).run()
    assert fast.seen == plain.seen and len(fast.seen) > 10


def test_with_progress_equals_replace() -> None:
    """The view a policy sees is ``dataclasses.replace`` of the job, every field in its place."""
    base = Job(7, "a", "m", 64, 4, 900, 12.5, 0.25, 3_000.0, 1.0, 2.0, 3.0, 2, False, ("v100",))
    view = with_progress(base, 40.5, 81.0, 99.0)
    assert type(view) is Job
    assert view == replace(base, iterations_done=40.5, attained_gpu_s=81.0, queued_since=99.0)
    assert [getattr(view, f) for f in ("id", "priority", "sharing_allowed", "gpu_types")] == [
        7,
        2,
        False,
        ("v100",),
    ]
    with pytest.raises(AttributeError):
        view.iterations_done = 0.0  # type: ignore[misc]  # still frozen


class FromScratchLists(TiresiasLists):
    """The queue lists as they were before their shortcuts: the reference. Its demotions and
    horizon are checked against (and its horizon computed by) the formulas as first written:
    ``min(bisect_right(thresholds, service), last queue)`` for a running job's queue, ``min``
    over ``now + (threshold − service) / rate``."""

    def observe(self, snapshot: Snapshot, pending=None, running=None) -> None:  # type: ignore[no-untyped-def]
        if pending is not None and self.config == snapshot.config.tiresias:
            present = pending.keys() | {rj.job.id for rj in snapshot.running}
            for jid in self.entries.keys() - present:  # every gone job found by a set difference
                del self.queues[self.entries.pop(jid).q][jid]
                self.dirty.discard(jid)
        config = snapshot.config.tiresias
        expected = {}  # running job kept by the lists → its queue after this round's demotions
        if self.config == config and snapshot.now >= self.now:
            last_q = len(config.thresholds)
            for rj in snapshot.running:
                entry = self.entries.get(rj.job.id)
                if entry is not None:
                    q = min(bisect_right(config.thresholds, self._service(rj.job, entry)), last_q)
                    expected[rj.job.id] = max(q, entry.q)
        super().observe(snapshot, pending)
        assert {jid: self.entries[jid].q for jid in expected} == expected

    def horizon(self, snapshot: Snapshot) -> float:
        config = snapshot.config.tiresias
        if config != self.config:
            return snapshot.now
        change = math.inf
        last_q = len(config.thresholds)
        for rj in snapshot.running:
            entry = self.entries.get(rj.job.id)
            if entry is not None and entry.q < last_q:
                rate = max(rj.job.gpus, 1) if config.service == "gpu_s" else 1.0
                service = self._service(rj.job, entry)
                change = min(change, snapshot.now + (config.thresholds[entry.q] - service) / rate)
        if config.starvation_guard:
            for job in snapshot.pending:
                entry = self.entries.get(job.id)
                if entry is None or entry.q == 0:
                    continue
                executed = (job.attained_gpu_s - entry.base_gpu_s) / max(job.gpus, 1)
                if executed > 0:
                    left = config.starvation_factor * executed - entry.pending_s
                    change = min(change, snapshot.now + max(0.0, left))
        return change - 1e-6

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool) -> RoundDecisions:
        pending_by_id = {j.id: j for j in snapshot.pending}
        self.observe(snapshot, pending_by_id)
        order = list(chain.from_iterable(self.queues))
        is_pending = list(map(pending_by_id.__contains__, order))
        keys = list(compress(range(len(order)), is_pending))
        pending = list(map(pending_by_id.__getitem__, compress(order, is_pending)))
        is_running = list(map(operator.not_, is_pending))
        position = dict(
            zip(compress(order, is_running), compress(range(len(order)), is_running), strict=True)
        )
        decisions = preemptive_exclusive(
            snapshot,
            profile,
            self.policy,
            lambda j: position[j.id],
            explain=explain,
            ranked_pending=(keys, pending),
        )
        stopped = {p.job_id for p in decisions.preemptions}
        started = {s.job_id for s in decisions.starts}
        touched = {self.entries[jid].q for jid in stopped | started | self.dirty}
        self.dirty = set()
        runs = (position.keys() - stopped) | started
        for i in touched:  # every touched list rebuilt, running jobs first
            queue = self.queues[i]
            ahead = list(filter(runs.__contains__, queue))
            if 0 < len(ahead) < len(queue):
                ahead.extend(filterfalse(runs.__contains__, queue))
                self.queues[i] = dict.fromkeys(ahead)
        return decisions


class ListsPolicy:
    """Tiresias on given queue lists, recording each round's decisions and lists."""

    name = "tiresias"
    preemptive = True

    def __init__(self, lists: TiresiasLists) -> None:
        self.lists = lists
        self.skip_rule = SkipRule(capacity=False, shares=False, horizon=self.horizon)
        self.seen: list[tuple[RoundDecisions, list[list[int]]]] = []
        self.horizons: list[float] = []

    def horizon(self, snapshot: Snapshot) -> float:
        self.horizons.append(self.lists.horizon(snapshot))
        return self.horizons[-1]

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        decisions = self.lists.decide(snapshot, profile, explain=True)  # the reasons hold the ranks
        self.seen.append((decisions, [list(q) for q in self.lists.queues]))
        return decisions


@pytest.mark.parametrize("placement", ["spread", "consolidated"])
@pytest.mark.parametrize("guard", [False, True])
@pytest.mark.parametrize("preset", ["muri-sim", None])
@pytest.mark.parametrize("seed", range(4))
def test_queue_lists_equal_the_lists_from_scratch(
    placement: str, guard: bool, preset: str | None, seed: int
) -> None:
    tiresias = TiresiasConfig(thresholds=(150.0, 900.0), starvation_guard=guard, demoted="back")
    config = config_for(preset)
    config = replace(config, scheduler=SchedulerConfig(placement=placement, tiresias=tiresias))
    jobs = trace(seed, aligned=preset is None)
    cluster = Cluster.uniform(2, 4)
    kept, scratch = ListsPolicy(TiresiasLists("tiresias")), ListsPolicy(FromScratchLists("tiresias"))
    fast = Simulator(jobs, cluster, kept, FakeProfile(), config).run()
    plain = Simulator(jobs, cluster, scratch, FakeProfile(), config).run()
    assert kept.seen == scratch.seen
    assert kept.horizons == scratch.horizons
    assert kept.horizons or preset is None  # the peers' model asks for one after every round
    assert_same(fast, plain)
    assert fast.preemptions > 0
