"""Tiresias' knobs (TiresiasConfig): several queues, wall-time service, the guard off, the peers'
queue lists (a demoted job to the back of the lower queue); and the consolidated placement.

One-GPU examples: 1 iteration per second, restart cost 0, rounds on events, completions and
arrivals before the round of an instant.
"""

from __future__ import annotations

import math

import pytest

from scheduling.core.policies import get_policy
from scheduling.core.policies.tiresias import next_queue_change, queue_of
from scheduling.core.preemptive import YarnPacker
from scheduling.core.round_state import RoundState
from scheduling.core.types import (
    GPU,
    Cluster,
    Job,
    Placement,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TiresiasConfig,
)
from scheduling.sim.engine import SimConfig, SimResult, simulate
from scheduling.sim.fidelity import Fidelity
from tests.unit.fakes import FakeProfile, job

THREE = TiresiasConfig(thresholds=(100.0, 1000.0), starvation_guard=False)


def test_queues_by_service() -> None:
    assert [queue_of(job(1, attained=a), 0.0, None, THREE) for a in (0, 99, 100, 999, 1000, 5000)] == [
        0,
        0,
        1,
        1,
        2,
        2,
    ]
    wall = TiresiasConfig(thresholds=(700.0,), service="wall_s")
    # 4 GPUs x 200 s = 800 GPU-s: 200 s of wall time, still the high queue under a 700 s limit
    assert queue_of(job(1, gpus=4, attained=800.0), 0.0, None, wall) == 0
    assert queue_of(job(1, gpus=4, attained=2800.0), 0.0, None, wall) == 1
    # guard off: a long-waiting low-queue job is never promoted
    assert queue_of(job(1, attained=5000.0, queued_since=0.0), 1e9, None, THREE) == 2


def test_next_queue_change_with_three_queues_and_wall_time() -> None:
    r = job(1, gpus=2, attained=300.0)  # queue 1; reaches 1,000 GPU-s at 2 GPU-s per s: +350 s
    snap = Snapshot(
        0.0,
        Cluster.uniform(1, 4),
        (),
        (RunningJob(r, Placement(1, (0, 1), 32, 0.0)),),
        SchedulerConfig(tiresias=THREE),
    )
    assert next_queue_change(snap) == pytest.approx(350.0)
    wall = SchedulerConfig(
        tiresias=TiresiasConfig(thresholds=(700.0,), service="wall_s", starvation_guard=False)
    )
    snap = Snapshot(0.0, Cluster.uniform(1, 4), (), (RunningJob(r, Placement(1, (0, 1), 32, 0.0)),), wall)
    assert next_queue_change(snap) == pytest.approx(550.0)  # 150 s executed, 700 s limit


def sim(jobs: list[Job], tiresias: TiresiasConfig, gpus: int = 1, **fidelity) -> SimResult:
    config = SimConfig(
        round_interval_s=math.inf,
        round_on_events=True,
        restart_cost_s=0.0,
        scheduler=SchedulerConfig(tiresias=tiresias),
        fidelity=Fidelity(rounds_at_horizon=True, **fidelity),
    )
    return simulate(jobs, Cluster.uniform(1, gpus), get_policy("tiresias"), FakeProfile(), config)


def starts(result: SimResult) -> dict[int, float]:
    return {o.job_id: o.first_start for o in result.outcomes}


@pytest.mark.parametrize("demoted", ["ahead", "back"])
def test_demoted_job_goes_behind_the_lower_queue(demoted: str) -> None:
    # One GPU, thresholds 100 and 1,000 GPU-s, guard off.
    # A (2,000 its) runs from 0. B (300 its) arrives at 10: queue 0, waits behind running A.
    # t=100: A demoted to queue 1 -> B preempts it (queue 0 first) and runs 100..200.
    # t=200: B demoted to queue 1, where A waits (preempted at 100, pending).
    # - ahead: running B stays ahead of pending A in queue 1 and runs to its end (400); A then.
    # - back (the peers' lists): B goes to the back of queue 1, behind pending A, and is
    #   preempted at once: A runs 200..1100, reaches 1,000 GPU-s (queue 2) and is preempted by B
    #   (queue 1), which ends at 1300; A then runs to 2300. Three preemptions instead of one.
    jobs = [job(1, iterations=2000), job(2, iterations=300, submit=10.0)]
    r = sim(jobs, TiresiasConfig(thresholds=(100.0, 1000.0), starvation_guard=False, demoted=demoted))
    end = {o.job_id: o.end_time for o in r.outcomes}
    if demoted == "ahead":
        assert end[2] == pytest.approx(400.0) and end[1] == pytest.approx(2300.0)
        assert r.preemptions == 1
    else:
        assert end[2] == pytest.approx(1300.0) and end[1] == pytest.approx(2300.0)
        assert r.preemptions == 3


def test_back_lists_guard_promotes_after_pending_as_long_as_it_ran() -> None:
    # The peers' guard (solve_starvation = 1): pending time since the last promotion, counted once
    # the job has run since it, against its executed time since that promotion, which a promotion
    # resets. One threshold of 100 s of wall time.
    # t=100: A (1,000 its, from 0) reaches 100 s, demoted; B (1,000 its, arrived at 50) runs.
    # t=200: B reaches 100 s, demoted to the back of queue 1; A, pending 100 s after running 100 s,
    #   is promoted to the back of queue 0 (service reset) and runs. And so on every 100 s: A runs
    #   [0,100], [200,300] ... [1800,1900] and ends at 1900, B runs the slots between and ends at
    #   2000; one preemption at each of the 18 switches from 100 to 1800.
    cfg = TiresiasConfig(thresholds=(100.0,), service="wall_s", starvation_guard=True, demoted="back")
    r = sim([job(1, iterations=1000), job(2, iterations=1000, submit=50.0)], cfg)
    end = {o.job_id: o.end_time for o in r.outcomes}
    assert end == {1: pytest.approx(1900.0), 2: pytest.approx(2000.0)}
    assert r.preemptions == 18


def test_fresh_lists_from_a_snapshot_in_the_middle_of_a_run() -> None:
    # A policy object that never saw the earlier rounds: jobs enter the list of their service's
    # queue, running ones first: the running low-queue job keeps its GPU, the new job (queue 0)
    # takes the idle one, and the pending low-queue job waits.
    config = SchedulerConfig(tiresias=TiresiasConfig(demoted="back"))
    run = RunningJob(job(1, attained=5000.0), Placement(1, (0,), 32, 0.0))
    snap = Snapshot(
        1000.0, Cluster.uniform(1, 2), (job(2, attained=4000.0, submit=-5.0), job(3)), (run,), config
    )
    d = get_policy("tiresias").decide(snap, FakeProfile())
    assert [s.job_id for s in d.starts] == [3] and d.preemptions == ()


# -- consolidated placement (the peers' yarn) -------------------------------------------------------


def state_with(busy: dict[int, int], nodes: int = 4, per_node: int = 8) -> RoundState:
    """A consolidated RoundState with ``busy[node]`` GPUs of each node held by one running job."""
    cluster = Cluster.uniform(nodes, per_node)
    running = []
    for node, count in busy.items():
        ids = tuple(range(node * per_node, node * per_node + count))
        running.append(RunningJob(job(100 + node, gpus=count), Placement(100 + node, ids, 32, 0.0)))
    snap = Snapshot(0.0, cluster, (), tuple(running), SchedulerConfig(placement="consolidated"))
    return RoundState(snap, consolidated=True)


def test_consolidated_first_fit_and_whole_nodes() -> None:
    state = state_with({0: 6, 1: 3})  # idle: node0 2, node1 5, node2 8, node3 8
    assert state.pick_idle(2) == (6, 7)  # the first node with 2 idle (not best fit)
    assert state.pick_idle(4) == (11, 12, 13, 14)
    assert state.pick_idle(8) == tuple(range(16, 24))
    # node2 whole, and the other 4 on the first other node with 4 idle: node1
    assert state.pick_idle(12) == (11, 12, 13, 14, *range(16, 24))
    assert state.pick_idle(16) == tuple(range(16, 32))
    assert state.pick_idle(20) == (11, 12, 13, 14, *range(16, 32))  # two whole nodes + 4 on node1
    five = state_with({0: 1, 1: 1}, nodes=5)  # 38 GPUs idle, three whole nodes
    assert five.idle_count == 38 and five.pick_idle(32) is None and five.pick_idle(24) is not None
    frag = state_with({0: 7, 1: 7, 2: 7, 3: 7})  # 4 idle GPUs, one per node
    assert frag.idle_count == 4 and frag.pick_idle(2) is None and frag.pick_idle(1) == (7,)


def test_yarn_packer_counts() -> None:
    packer = YarnPacker(state_with({}, nodes=2))
    assert packer.place(6) and packer.place(4) and packer.free == [2, 4]
    assert not packer.place(8)  # 6 GPUs free, none on one node
    assert packer.place(2) and packer.free == [0, 4]
    # the packer fills an empty copy of the cluster (running jobs are ranked like pending ones);
    # only an unhealthy GPU keeps its node from being whole
    assert YarnPacker(state_with({0: 1}, nodes=2)).place(16)
    gpus = tuple(GPU(i, f"n{i // 8}", i % 8, 49_140, healthy=i != 3) for i in range(16))
    sick = RoundState(Snapshot(0.0, Cluster(gpus), (), ()), consolidated=True)
    assert not YarnPacker(sick).place(16) and YarnPacker(sick).place(15)  # node1 whole + 7 on node0


def test_fifo_blocks_on_fragmentation_only_when_consolidated() -> None:
    # 2 nodes x 2 GPUs; two 1-GPU jobs on different nodes leave one GPU idle per node; the head
    # of the queue needs 2 GPUs: spread starts it across nodes, consolidated makes it wait.
    cluster = Cluster(tuple(GPU(i, f"n{i // 2}", i % 2, 49_140) for i in range(4)))
    running = tuple(RunningJob(job(9 + i), Placement(9 + i, (2 * i,), 32, 0.0)) for i in range(2))
    for placement, started in (("spread", [1]), ("consolidated", [])):
        snap = Snapshot(0.0, cluster, (job(1, gpus=2),), running, SchedulerConfig(placement=placement))
        d = get_policy("fifo").decide(snap, FakeProfile())
        assert [s.job_id for s in d.starts] == started
