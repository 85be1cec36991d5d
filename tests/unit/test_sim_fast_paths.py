"""The simulator's per-round fast paths give the results of the plain computation.

Two shortcuts of :class:`scheduling.sim.engine.Simulator` (docs/PERFORMANCE.md §1): a relaunch
re-files a job's completion at its unchanged rate instead of recomputing its slowdown and charge,
and the second snapshot of a round reuses the running jobs' views of the first at the same
instant. A subclass that recomputes everything (every relaunch rescheduled, every view rebuilt)
is the reference; random traces under the peers' presets, which relaunch every running job at
every round, and our defaults, with preemptive and sharing policies, must give equal outcomes.
"""

from __future__ import annotations

import random

import pytest

from scheduling.core.policies import get_policy
from scheduling.core.types import Cluster, Job
from scheduling.sim.engine import SimConfig, SimResult, Simulator
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
                    self._reschedule(s, now)  # ξ and the charge recomputed, then the event filed

    def _snapshot(self, now: float):  # type: ignore[no-untyped-def]
        self._views = {}  # nothing to reuse: every view is rebuilt
        return super()._snapshot(now)


def trace(seed: int) -> list[Job]:
    rng = random.Random(seed)
    return [
        job(
            i,
            gpus=rng.choice((1, 1, 2, 4, 8)),
            model=rng.choice(("m", "n")),
            iterations=rng.randint(20, 3_000),
            iter_time_s=rng.choice((0.5, 1.0, 2.0)),
            submit=rng.uniform(0, 4_000),
        )
        for i in range(40)
    ]


def outcomes(result: SimResult) -> list:
    return sorted(result.outcomes, key=lambda o: o.job_id)


@pytest.mark.parametrize("preset", ["muri-sim", "muri-testbed", None])
@pytest.mark.parametrize("policy", ["srtf", "tiresias", "sjf-bsbf"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_paths_equal_the_plain_computation(preset: str | None, policy: str, seed: int) -> None:
    config = SimConfig() if preset is None else PRESETS[preset].sim_config()
    cluster = Cluster.uniform(2, 4)
    jobs = trace(seed)
    fast = Simulator(jobs, cluster, get_policy(policy), FakeProfile(), config).run()
    plain = PlainSimulator(jobs, cluster, get_policy(policy), FakeProfile(), config).run()
    assert outcomes(fast) == outcomes(plain)
    assert fast.rounds == plain.rounds
    assert len(fast.outcomes) == len(jobs)
