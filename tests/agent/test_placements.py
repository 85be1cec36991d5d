"""Placements are applied once: duplicates, stale and out-of-order messages (TESTING.md, Faults)."""

from __future__ import annotations

from agent.core import Agent
from agent.messages import PlacementMessage

from .conftest import FakeClock, placement


def kinds(events) -> list[tuple[int, str]]:
    return [(e.job_id, e.event) for e in events]


def test_start_is_applied_and_reported(agent: Agent) -> None:
    assert agent.apply(placement(job_id=7, generation=3)) is True
    assert agent.running == {7: 3}
    [event] = agent.step(0.0)
    assert (event.job_id, event.generation, event.event, event.iterations_done) == (7, 3, "started", 0)


def test_duplicate_delivery_is_applied_once(agent: Agent) -> None:
    assert agent.apply(placement(generation=1)) is True
    assert agent.apply(placement(generation=1)) is False
    assert kinds(agent.step(0.0)) == [(1, "started")]


def test_stale_generation_is_ignored(agent: Agent, clock: FakeClock) -> None:
    agent.apply(placement(generation=5, slowdown=1.25))
    assert agent.apply(placement(generation=4, action="update", slowdown=1.0)) is False
    assert agent.apply(placement(generation=2, action="stop")) is False
    agent.step(0.0)
    # Still at ξ = 1.25: 100 it · 0.5 s · 1.25 / 10 = 6.25 s of wall time, not 5 s (ξ = 1).
    assert kinds(agent.step(6.0)) == [(1, "progress")]
    assert kinds(agent.step(6.25)) == [(1, "finished")]


def test_stop_overtaken_by_nothing_then_late_start_is_ignored(agent: Agent) -> None:
    # Out of order: the server sent start (g1) then stop (g2, a cancel); the stop arrives first.
    assert agent.apply(placement(generation=2, action="stop")) is True
    assert agent.apply(placement(generation=1)) is False
    assert agent.running == {}
    assert agent.step(0.0) == []


def test_update_overtaking_its_start_starts_with_the_newest_slowdown(agent: Agent) -> None:
    # start (g1, alone) then update (g2, ξ = 1.25) arrive reversed.
    assert agent.apply(placement(generation=2, action="update", slowdown=1.25)) is True
    assert agent.apply(placement(generation=1, slowdown=1.0)) is False
    assert agent.running == {1: 2}
    agent.step(0.0)
    assert kinds(agent.step(6.24)) == [(1, "progress")]  # 6.24 / 0.0625 = 99.84 iterations
    assert kinds(agent.step(6.25)) == [(1, "finished")]


def test_start_again_on_the_same_gpus_keeps_the_run(agent: Agent) -> None:
    agent.apply(placement(generation=1), now=0.0)
    agent.step(0.0)
    # Re-sent after a server restart: same placement, new generation → acknowledged, not restarted.
    assert agent.apply(placement(generation=2, iterations_done=0), now=2.0) is True
    started, progress = agent.step(2.0)
    # 2 s at 0.05 s/iteration (0.5 s · 1 / 10) = 40 iterations, kept.
    assert (started.event, started.generation, started.iterations_done) == ("started", 2, 40)
    assert (progress.event, progress.generation, progress.iterations_done) == ("progress", 2, 40)


def test_new_gpus_restart_the_job_from_its_progress(agent: Agent) -> None:
    agent.apply(placement(generation=1, gpu_indices=[0]), now=0.0)
    agent.step(0.0)
    assert agent.apply(placement(generation=2, gpu_indices=[1], iterations_done=10), now=2.0) is True
    [event] = agent.step(2.0)
    # 40 iterations done locally beat the server's 10: the new run resumes at 40.
    assert (event.event, event.generation, event.iterations_done) == ("started", 2, 40)
    # 60 iterations left at 0.05 s → 3 s more.
    assert kinds(agent.step(4.99)) == [(1, "progress")]
    assert kinds(agent.step(5.0)) == [(1, "finished")]


def test_update_of_a_finished_job_does_not_resurrect_it(agent: Agent) -> None:
    agent.apply(placement(generation=1), now=0.0)
    agent.step(0.0)
    assert kinds(agent.step(5.0)) == [(1, "finished")]  # 100 · 0.05 s
    # The partner's end sends an update that crossed the finished event.
    assert agent.apply(placement(generation=2, action="update", slowdown=1.0)) is False
    assert agent.running == {}
    # A new start (a retry decided by the server) does run it again.
    assert agent.apply(placement(generation=3), now=6.0) is True
    assert agent.running == {1: 3}


def test_stop_cancels_the_job_and_reports_its_progress(agent: Agent) -> None:
    agent.apply(placement(generation=1), now=0.0)
    agent.step(0.0)
    assert agent.apply(placement(generation=2, action="stop"), now=1.0) is True
    assert agent.running == {}
    [event] = agent.step(1.0)
    # 1 s at 0.05 s/iteration = 20 iterations, reported with the stop's generation.
    assert (event.event, event.generation, event.iterations_done) == ("stopped", 2, 20)
    assert agent.step(100.0) == []  # nothing runs any more


def test_placement_for_another_node_is_ignored(agent: Agent) -> None:
    assert agent.apply(placement(node="node-99")) is False
    assert agent.running == {}


def test_malformed_placement_is_reported_failed_not_lost(agent: Agent) -> None:
    assert agent.apply(placement(job_id=4, generation=1, sub_batch=24, accum_steps=2, batch_size=32)) is False
    [event] = agent.step(0.0)
    assert (event.job_id, event.event) == (4, "failed")
    assert "sub_batch × accum_steps must equal batch_size" in event.reason
    # Unreadable job id: nothing to report, nothing applied.
    assert agent.apply({"node": "node-00", "job_id": "x"}) is False
    assert agent.step(0.0) == []


def test_gpu_index_outside_the_node_fails_the_job(agent: Agent) -> None:
    assert agent.apply(placement(gpu_indices=[3, 4])) is True  # the node has GPUs 0-3
    [event] = agent.step(0.0)
    assert event.event == "failed" and "[4]" in event.reason
    assert agent.running == {}


def test_heartbeat_lists_gpus_and_running_jobs(agent: Agent, clock: FakeClock) -> None:
    agent.apply(placement(job_id=2, generation=6), now=0.0)
    clock.now = 1.5
    beat = agent.heartbeat().payload()
    assert beat["node"] == "node-00"
    assert [g["index"] for g in beat["gpus"]] == [0, 1, 2, 3]
    assert all(g["memory_mb"] == 16_000 and g["healthy"] for g in beat["gpus"])
    # 1.5 s / 0.05 s = 30 iterations.
    assert beat["running"] == [{"job_id": 2, "generation": 6, "iterations_done": 30}]


def test_message_validation_names_the_field() -> None:
    bad = [
        ({"action": "pause"}, "action must be one of"),
        ({"generation": -1}, "generation must be >= 0"),
        ({"gpu_indices": [0, 0]}, "distinct"),
        ({"iter_time_s": 0}, "iter_time_s must be > 0"),
        ({"slowdown": 0.5}, "slowdown must be >= 1"),
        ({"iterations_done": 101}, "exceeds iterations"),
        ({"command": 3}, "command must be"),
        ({"job_id": True}, "job_id must be an integer"),
    ]
    for fields, expected in bad:
        try:
            PlacementMessage.from_kwargs(placement(**fields))
        except ValueError as exc:
            assert expected in str(exc), (fields, str(exc))
        else:
            raise AssertionError(f"{fields} was accepted")
    # A stop needs only its identity; a command string is split like a shell would.
    assert (
        PlacementMessage.from_kwargs({"node": "n", "job_id": 1, "generation": 2, "action": "stop"}).action
        == "stop"
    )
    parsed = PlacementMessage.from_kwargs(placement(command="python train.py --lr '0.1 0.2'"))
    assert parsed.command == ("python", "train.py", "--lr", "0.1 0.2")
    assert PlacementMessage.from_kwargs(placement(command="")).command is None  # an emulated job's


def test_update_after_a_stop_does_not_restart_the_job(agent: Agent) -> None:
    agent.apply(placement(generation=1), now=0.0)
    agent.apply(placement(generation=2, action="stop"), now=1.0)
    # The server never sends an update after a stop; if one arrives (a server bug), it must
    # still not resurrect a cancelled job.
    assert agent.apply(placement(generation=3, action="update", slowdown=1.25), now=1.0) is False
    assert agent.running == {}
    assert [e.event for e in agent.step(1.0)] == ["started", "stopped"]


def test_malformed_newer_message_stops_the_running_job(agent: Agent) -> None:
    agent.apply(placement(generation=1), now=0.0)
    assert agent.apply(placement(generation=2, action="update", iter_time_s=-1), now=1.0) is False
    assert agent.running == {}
    started, failed = agent.step(1.0)
    # 1 s at 0.05 s/iteration = 20 iterations done when it was stopped.
    assert (failed.event, failed.generation, failed.iterations_done) == ("failed", 2, 20)
    assert "iter_time_s must be" in failed.reason
