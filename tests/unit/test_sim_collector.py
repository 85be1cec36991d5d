"""The simulator raises the collector's young threshold while it runs and leaves the process's
garbage-collection state as it found it (:mod:`scheduling.sim.collector`): the thresholds, whether
the collector is enabled, what is frozen; after a policy error too, and when one simulation runs
inside another (the last to end restores)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest

from scheduling.core.policies import get_policy
from scheduling.core.types import Cluster, Profile, RoundDecisions, Snapshot
from scheduling.sim.collector import SIM_GEN0_THRESHOLD, fewer_collections
from scheduling.sim.engine import SimConfig, simulate
from tests.unit.fakes import FakeProfile, job

CALLER = (123, 7, 9)  # a caller's thresholds, distinct from CPython's defaults and from ours


class Watching:
    """FIFO that records the collector's thresholds and state at every decision, then runs
    ``hook`` (if any)."""

    name = "fifo"

    def __init__(self, hook: Callable[[], None] | None = None) -> None:
        self.inner = get_policy("fifo")
        self.seen: list[tuple[tuple[int, ...], bool]] = []
        self.hook = hook

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        self.seen.append((gc.get_threshold(), gc.isenabled()))
        if self.hook is not None:
            self.hook()
        return self.inner.decide(snapshot, profile, explain=explain)


def run(policy: Watching) -> None:
    jobs = [job(1, submit=0.0, iterations=100), job(2, submit=30.0, iterations=200, gpus=2)]
    result = simulate(jobs, Cluster.uniform(1, 2), policy, FakeProfile(), SimConfig())
    assert len(result.outcomes) == 2


@pytest.fixture
def caller_gc() -> Iterator[None]:
    """The test's thresholds set, and the process's own put back whatever the test does."""
    saved, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(*CALLER)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        if enabled:
            gc.enable()
        else:
            gc.disable()


@pytest.mark.usefixtures("caller_gc")
def test_raised_while_running_and_restored_after() -> None:
    frozen = gc.get_freeze_count()
    policy = Watching()
    run(policy)
    assert policy.seen and all(s == ((SIM_GEN0_THRESHOLD, 7, 9), True) for s in policy.seen)
    assert gc.get_threshold() == CALLER
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # nothing frozen, nothing unfrozen


@pytest.mark.usefixtures("caller_gc")
def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    policy = Watching()
    run(policy)
    assert all(enabled is False for _, enabled in policy.seen)
    assert not gc.isenabled()
    assert gc.get_threshold() == CALLER


@pytest.mark.usefixtures("caller_gc")
def test_restored_after_a_policy_error() -> None:
    def fail() -> None:
        raise RuntimeError("policy bug")

    with pytest.raises(RuntimeError, match="policy bug"):
        run(Watching(fail))
    assert gc.get_threshold() == CALLER


@pytest.mark.usefixtures("caller_gc")
def test_nested_simulation_leaves_the_outer_one_raised() -> None:
    inner: list[Watching] = []

    def simulate_inside() -> None:
        inner.append(Watching())
        run(inner[-1])

    outer = Watching(simulate_inside)
    run(outer)
    raised = ((SIM_GEN0_THRESHOLD, 7, 9), True)
    # every outer decision after the first inner simulation ended still sees the raised threshold
    assert len(outer.seen) >= 2 and all(s == raised for s in outer.seen)
    assert all(s == raised for w in inner for s in w.seen)
    assert gc.get_threshold() == CALLER


@pytest.mark.parametrize("gen0", [0, SIM_GEN0_THRESHOLD + 1])
def test_a_caller_threshold_of_zero_or_above_ours_is_kept(gen0: int) -> None:
    saved = gc.get_threshold()
    gc.set_threshold(gen0, 7, 9)
    try:
        with fewer_collections():
            assert gc.get_threshold() == (gen0, 7, 9)
        assert gc.get_threshold() == (gen0, 7, 9)
    finally:
        gc.set_threshold(*saved)
