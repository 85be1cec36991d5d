"""Tiresias (Gu et al., NSDI'19): starvation guard with hysteresis, no ping-pong, next queue change.

Constants: queue threshold Q = 3,200 GPU-s, starvation factor F = 1.0. Simulations: one GPU,
1 iteration/s, rounds every 60 s, restart cost 30 s after a preemption (attained service counts
the restart time: GPUs × wall time held), completions and arrivals before the round of an instant.
"""

from __future__ import annotations

import math

import pytest

from scheduling.core.policies import get_policy
from scheduling.core.policies.tiresias import next_queue_change, queue_of
from scheduling.core.types import Cluster, Job, Placement, RunningJob, Snapshot
from scheduling.sim.engine import SimConfig, simulate
from tests.unit.fakes import FakeProfile, job


def running(j: Job, start_time: float, gpu_ids: tuple[int, ...] = (0,)) -> RunningJob:
    return RunningJob(j, Placement(j.id, gpu_ids, j.batch_size, start_time))


def snapshot(now: float, pending: list[Job], run: list[RunningJob], gpus: int = 1) -> Snapshot:
    return Snapshot(now, Cluster.uniform(1, gpus), tuple(pending), tuple(run))


def run_both(jobs: list[Job]) -> tuple[dict[int, float], int]:
    """Ends and preemption count, checking that skipping idle rounds changes nothing."""
    fast = simulate(jobs, Cluster.uniform(1, 1), get_policy("tiresias"), FakeProfile())
    slow = simulate(
        jobs, Cluster.uniform(1, 1), get_policy("tiresias"), FakeProfile(), SimConfig(skip_idle_rounds=False)
    )
    assert fast.outcomes == slow.outcomes
    assert fast.preemptions == slow.preemptions
    return {o.job_id: o.end_time for o in fast.outcomes}, fast.preemptions


# -- queue_of on snapshots -------------------------------------------------------------------------


@pytest.mark.parametrize(("waited", "queue"), [(5000.0, 1), (5001.0, 0)])
def test_pending_job_is_promoted_after_waiting_longer_than_it_ran(waited: float, queue: int) -> None:
    # 2 GPUs, 10,000 GPU-s attained -> low queue, executed 10,000 / 2 = 5,000 s; promoted once its
    # current wait exceeds 1.0 x 5,000 s (strictly).
    j = job(1, gpus=2, attained=10_000, queued_since=1000.0)
    assert queue_of(j, 1000.0 + waited) == queue


@pytest.mark.parametrize(("now", "preempted"), [(7060.0, False), (10_140.0, False), (10_200.0, True)])
def test_promoted_job_keeps_the_high_queue_for_another_threshold(now: float, preempted: bool) -> None:
    # P: 1 GPU, 5,000 GPU-s when it started at 7,000 after waiting since 1,000: 6,000 s > 1.0 x
    # 5,000 s -> it started promoted. It stays high until 3,200 GPU-s more: 7,000 + 3,200 = 10,200.
    # N: a new job (0 GPU-s, high queue). Same queue: running P is ahead; low P: N preempts it.
    p = running(job(1, attained=5000 + (now - 7000), submit=0, queued_since=1000.0), 7000.0)
    n = job(2, submit=7050)
    assert queue_of(p.job, now, p) == (1 if preempted else 0)
    d = get_policy("tiresias").decide(snapshot(now, [n], [p]), FakeProfile())
    assert [x.job_id for x in d.preemptions] == ([1] if preempted else [])
    assert [s.job_id for s in d.starts] == ([2] if preempted else [])


def test_job_not_promoted_at_start_is_low_once_past_the_threshold() -> None:
    # Same P, but it waited 3,000..7,000 = 4,000 s < 5,000 s before starting: not promoted, low
    # (attained 5,060 >= 3,200), so the new job N preempts it at once.
    p = running(job(1, attained=5060, submit=0, queued_since=3000.0), 7000.0)
    assert queue_of(p.job, 7060.0, p) == 1
    d = get_policy("tiresias").decide(snapshot(7060.0, [job(2, submit=7050)], [p]), FakeProfile())
    assert [x.job_id for x in d.preemptions] == [1]


def test_no_preemption_inside_a_queue() -> None:
    # R: low queue, running (5,000 GPU-s, started at 0 without waiting). L: low queue, pending,
    # submitted earlier (-10), waited 100 s < its 4,000 s executed -> not promoted. Same queue:
    # the running job stays, L waits.
    r = running(job(1, attained=5000, submit=0), 0.0)
    low = job(2, attained=4000, submit=-10, queued_since=900.0)
    d = get_policy("tiresias").decide(snapshot(1000.0, [low], [r]), FakeProfile())
    assert d.preemptions == () and d.starts == ()


# -- whole runs, computed by hand -------------------------------------------------------------------


def test_promotion_after_the_stated_wait_then_no_demotion_for_a_new_job() -> None:
    # A: t=0, 5,000 it. B: t=10, 4,000 it. C: t=6,600, 100 it.
    # 0: A starts. A reaches 3,200 GPU-s at 3,200 -> low; round 3,240: B (high) preempts A
    #   (A: 3,240 GPU-s = 3,240 s executed, 3,240 it done). B starts (first start, no cost).
    # B reaches 3,200 at 6,440 -> low, still running (same queue as A, running first).
    # A waited since 3,240: > 3,240 s only after 6,480 (at the round of 6,480 it equals it) ->
    #   round 6,540: A promoted, preempts B (B: 3,300 it done, 700 left). A restarts: 6,570 +
    #   1,760 it -> ends 8,330. A stays high until 6,540 + 3,200 = 9,740 > 8,330.
    # C arrives at 6,600 (high) but A, high and running, is ahead of it: no preemption.
    # Round 8,340: C starts (no cost) -> 8,440. B (low; starving only after 6,540 + 3,300 = 9,840)
    #   starts at round 8,460: 8,490 + 700 -> 9,190. Two preemptions.
    ends, preemptions = run_both(
        [job(1, iterations=5000), job(2, iterations=4000, submit=10), job(3, iterations=100, submit=6600)]
    )
    assert ends == {1: 8330.0, 2: 9190.0, 3: 8440.0}
    assert preemptions == 2


def test_no_ping_pong_between_two_equal_low_queue_jobs() -> None:
    # X (id 1), Y (id 2): both t=0, 20,000 it; X first (id). Each is preempted only when the other
    # has waited longer than it has run, so the gaps between preemptions grow:
    # P1 3,240: Y (high) preempts X (low since 3,200). X: 3,240 GPU-s, 3,240 it.
    # P2 6,540: X waited > 3,240 (6,480 is equal) -> promoted, preempts Y (3,300 GPU-s, 3,300 it).
    # P3 9,900: Y waited > 3,300 (9,840 equal); X is low again (3,360 GPU-s since its promotion
    #   >= 3,200). X: 3,240 + 3,360 = 6,600 GPU-s, 3,240 + 3,330 = 6,570 it.
    # P4 16,560: X waited > 6,600 (16,500 equal). Y: 3,300 + 6,660 = 9,960 GPU-s, 9,930 it.
    #   X restarts: 16,590 + 13,430 it left would end at 30,020.
    # P5 26,580: Y waited > 9,960 (26,520 equal). X: 16,620 GPU-s, 16,560 it. Y restarts:
    #   26,610 + 10,070 it -> ends 36,680 (X starving only after 26,580 + 16,620 = 43,200).
    # X restarts at round 36,720: 36,750 + 3,440 -> 40,190. Five preemptions in 40,190 s.
    ends, preemptions = run_both([job(1, iterations=20_000), job(2, iterations=20_000)])
    assert ends == {1: 40_190.0, 2: 36_680.0}
    assert preemptions == 5


# -- next queue change (the simulator's skip rule) --------------------------------------------------


def test_next_queue_change() -> None:
    # Running, high: 3,000 GPU-s on 2 GPUs crosses 3,200 after 100 s -> 1,100.
    high = running(job(1, gpus=2, attained=3000), 900.0, (0, 1))
    # Pending, low: 4,000 GPU-s on 1 GPU, waiting since 500 -> starving after 500 + 4,000 = 4,500.
    low = job(2, attained=4000, queued_since=500.0)
    # Running, promoted when it started at 800: 5,000 GPU-s then, waited since -5,000, i.e.
    # 5,800 s > 5,000 s; 200 GPU-s since -> high until 800 + 3,200 = 4,000.
    promoted = running(job(3, attained=5200, submit=-6000, queued_since=-5000.0), 800.0)
    # Running, low, not promoted (started at 0 without waiting): never changes by itself.
    plain = running(job(4, attained=5000), 0.0)
    assert next_queue_change(snapshot(1000.0, [low], [high], 4)) == pytest.approx(1100.0)
    assert next_queue_change(snapshot(1000.0, [low], [plain], 4)) == pytest.approx(4500.0)
    assert next_queue_change(snapshot(1000.0, [low], [promoted, plain], 4)) == pytest.approx(4000.0)
    assert queue_of(promoted.job, 1000.0, promoted) == 0
    assert (
        queue_of(
            promoted.job, 4000.0, running(job(3, attained=8200, submit=-6000, queued_since=-5000.0), 800.0)
        )
        == 1
    )
    assert next_queue_change(snapshot(1000.0, [], [plain], 4)) == math.inf
