"""A round's jobs per GPU and idle GPUs (:class:`~scheduling.core.round_state.RoundState`) as a
loop over every running job's GPUs counts them.

The round state counts them at C speed (a ``Counter`` over the running jobs' GPU ids, idle GPUs
filtered by it; docs/PERFORMANCE.md §5), and the preemptive walk reads the healthy GPU ids from
the cluster's layout. The reference is the loop it replaced: ``load[g] += 1`` for every GPU id
of every running job within the cluster, and a healthy GPU is idle iff its load is 0. Random
clusters with unhealthy GPUs, running jobs that share GPUs or list a GPU id outside the cluster.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.core.round_state import RoundState
from scheduling.core.types import GPU, Cluster, Placement, RunningJob, SchedulerConfig, Snapshot
from tests.unit.fakes import job

clusters_st = st.lists(st.booleans(), min_size=1, max_size=16)  # healthy, per GPU; 4 per node
running_st = st.lists(st.lists(st.integers(-2, 18), min_size=1, max_size=4, unique=True), max_size=8)


def snapshot_of(healthy: list[bool], gangs: list[list[int]]) -> Snapshot:
    cluster = Cluster(
        tuple(GPU(i, f"node-{i // 4}", i % 4, 40_000, "v100", ok) for i, ok in enumerate(healthy))
    )
    running = tuple(
        RunningJob(job(i, gpus=len(ids)), Placement(i, tuple(ids), 32, 0.0)) for i, ids in enumerate(gangs)
    )
    return Snapshot(100.0, cluster, (), running, SchedulerConfig())


@settings(max_examples=300, deadline=None)
@given(clusters_st, running_st)
def test_counts_equal_the_loop_over_running_gpus(healthy: list[bool], gangs: list[list[int]]) -> None:
    snapshot = snapshot_of(healthy, gangs)
    n = len(healthy)
    load = [0] * n
    for ids in gangs:
        for g in ids:
            if 0 <= g < n:
                load[g] += 1
    state = RoundState(snapshot)
    assert state.load == load
    idle = [g for g in range(n) if healthy[g] and not load[g]]  # node by node, ids ascending
    assert state.idle_ids() == idle
    assert state.idle_count == len(idle)
    assert state.healthy_ids == frozenset(g for g in range(n) if healthy[g])


def test_hand_example() -> None:
    # 2 nodes × 4 GPUs, GPU 5 unhealthy; job 0 on 0–1, job 1 on 1 and 9 (outside), job 2 on 5
    snapshot = snapshot_of([True] * 5 + [False] + [True] * 2, [[0, 1], [1, 9], [5]])
    state = RoundState(snapshot)
    assert state.load == [1, 2, 0, 0, 0, 1, 0, 0]
    assert state.idle_ids() == [2, 3, 4, 6, 7]
    assert state.idle_count == 5
