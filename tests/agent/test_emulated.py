"""Emulated progress from the profile: iter_time_s · ξ per iteration, compressed by --speedup."""

from __future__ import annotations

import pytest

from agent.core import Agent
from agent.executors import EmulatedExecutor
from agent.messages import PlacementMessage

from .conftest import placement


def message(**fields) -> PlacementMessage:
    return PlacementMessage.from_kwargs(placement(**fields))


def test_shared_job_finishes_after_iterations_times_slowdown_over_speedup() -> None:
    # 100 iterations · 0.5 s · ξ 1.25 / speedup 10 = 6.25 s of wall time.
    job = EmulatedExecutor(message(slowdown=1.25), now=0.0, speedup=10.0)
    assert job.finish_time() == pytest.approx(6.25)
    assert job.poll(6.2).state == "running"
    assert job.poll(6.25).state == "finished"
    # 3 s of wall time = 30 s of job time at 0.625 s/iteration = 48 iterations.
    assert job.poll(3.0).iterations_done == pytest.approx(48.0)
    # The measured iteration time is in job time, uncompressed: 0.5 s · 1.25.
    assert job.poll(3.0).iter_time_s == pytest.approx(0.625)


def test_slowdown_change_keeps_the_progress_made_before() -> None:
    # Alone for 2 s at 0.05 s/iteration: 40 iterations; then shared (ξ 1.25, 0.0625 s/iteration):
    # 60 iterations more take 3.75 s → finished at 5.75 s.
    job = EmulatedExecutor(message(), now=0.0, speedup=10.0)
    job.update(1.25, now=2.0)
    assert job.poll(2.0).iterations_done == pytest.approx(40.0)
    assert job.finish_time() == pytest.approx(5.75)
    assert job.poll(5.74).state == "running"
    assert job.poll(5.75).state == "finished"


def test_resumed_job_runs_only_its_remaining_iterations() -> None:
    # 30 of 100 done; 70 · 0.5 s / speedup 1 = 35 s.
    job = EmulatedExecutor(message(iterations_done=30), now=100.0, speedup=1.0)
    assert job.finish_time() == pytest.approx(135.0)


def test_stopped_job_makes_no_more_progress() -> None:
    job = EmulatedExecutor(message(), now=0.0, speedup=10.0)
    job.stop(1.0)
    assert job.poll(50.0).state == "stopped"
    assert job.poll(50.0).iterations_done == pytest.approx(20.0)  # 1 s / 0.05 s


def test_agent_reports_progress_at_its_interval_then_finished(agent: Agent) -> None:
    agent.apply(placement(generation=1), now=0.0)
    agent.step(0.0)
    assert agent.step(0.5) == []  # progress every 1 s of wall time
    [progress] = agent.step(1.0)
    # 1 s / 0.05 s = 20 iterations, each measured at 0.5 s · ξ 1.
    assert (progress.event, progress.iterations_done, progress.iter_time_s) == ("progress", 20, 0.5)
    # The partner arrives at 2 s (update, ξ = 1.25): 40 done, 60 left at 0.0625 s = 3.75 s.
    assert agent.apply(placement(generation=2, action="update", slowdown=1.25), now=2.0) is True
    [progress] = agent.step(2.0)
    assert (progress.generation, progress.iterations_done, progress.iter_time_s) == (2, 40, 0.625)
    [finished] = agent.step(5.75)
    assert (finished.event, finished.generation, finished.iterations_done) == ("finished", 2, 100)


def test_speedup_must_be_positive() -> None:
    with pytest.raises(ValueError, match="speedup must be > 0"):
        EmulatedExecutor(message(), now=0.0, speedup=0.0)
