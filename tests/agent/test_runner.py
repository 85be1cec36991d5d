"""The loop: events reach the server in order across an outage; heartbeats; a restarted agent."""

from __future__ import annotations

import threading
from functools import partial

from agent.core import Agent
from agent.executors import EmulatedExecutor
from agent.gpus import GpuInfo, declared_gpus
from agent.reporter import Reporter
from agent.runner import Runner

from .conftest import NODE, FakeClock, FakeTransport, placement


def heartbeats(transport: FakeTransport) -> list[dict]:
    return [p for path, p in transport.sent if path == "/api/v1/agent/heartbeat/"]


def test_events_survive_a_server_outage_in_order(agent: Agent, clock: FakeClock) -> None:
    transport = FakeTransport()
    runner = Runner(
        [agent], [Reporter(transport, backoff_s=1.0, backoff_max_s=2.0)], clock, heartbeat_every_s=5.0
    )
    agent.apply(placement(generation=1), now=0.0)
    transport.down = True
    for now in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0):  # the job (5 s of wall time) ends during the outage
        clock.now = now
        runner.tick()
    assert transport.sent == []
    transport.down = False
    clock.now = 7.0
    runner.tick()
    # Progress at 1, 2, 3, 4 s was coalesced into the last one (4 s / 0.05 s = 80 iterations).
    assert transport.events() == [(1, "started", 0), (1, "progress", 80), (1, "finished", 100)]
    assert heartbeats(transport) == []  # heartbeats at 0 s and 5 s were lost, never queued
    clock.now = 10.0
    runner.tick()
    assert heartbeats(transport)[-1]["running"] == []


def test_heartbeats_every_interval_with_running_jobs(agent: Agent, clock: FakeClock) -> None:
    transport = FakeTransport()
    runner = Runner([agent], [Reporter(transport)], clock, heartbeat_every_s=5.0)
    agent.apply(placement(job_id=3, generation=2), now=0.0)
    for now in (0.0, 1.0, 4.9, 5.0, 6.0):
        clock.now = now
        runner.tick()
    beats = heartbeats(transport)
    assert len(beats) == 2  # at 0 s and 5 s
    # 5 s / 0.05 s = 100 iterations: the job finished at 5 s, in the same tick, before the heartbeat.
    assert beats[0]["running"] == [{"job_id": 3, "generation": 2, "iterations_done": 0}]
    assert beats[1]["running"] == []


def test_gpu_probe_refreshes_health_before_each_heartbeat(agent: Agent, clock: FakeClock) -> None:
    transport = FakeTransport()
    sick = (GpuInfo(0, "GPU-a", 16_000), GpuInfo(1, "GPU-b", 16_000, healthy=False))
    runner = Runner([agent], [Reporter(transport)], clock, gpu_probe=lambda: sick)
    runner.tick()
    assert [g["healthy"] for g in heartbeats(transport)[0]["gpus"]] == [True, False]
    # NVML stops answering (driver gone): the GPUs are still listed, all unhealthy.
    runner = Runner([agent], [Reporter(transport)], clock, gpu_probe=lambda: None)
    runner.tick()
    assert [(g["uuid"], g["healthy"]) for g in heartbeats(transport)[1]["gpus"]] == [
        ("GPU-a", False),
        ("GPU-b", False),
    ]


def test_a_restarted_agent_reports_that_it_runs_nothing(clock: FakeClock) -> None:
    transport = FakeTransport()
    factory = partial(EmulatedExecutor, speedup=10.0)
    first = Agent(NODE, declared_gpus(NODE, 4, 16_000), factory, clock)
    first.apply(placement(generation=1), now=0.0)
    Runner([first], [Reporter(transport)], clock).tick()
    # The process dies; a new one starts with no memory of job 1: the server learns it from the
    # heartbeat and re-sends the placement with a new generation (docs/AGENT.md, reconciliation).
    second = Agent(NODE, declared_gpus(NODE, 4, 16_000), factory, clock)
    Runner([second], [Reporter(transport)], clock).tick()
    assert [b["running"] for b in heartbeats(transport)] == [
        [{"job_id": 1, "generation": 1, "iterations_done": 0}],
        [],
    ]
    assert second.apply(placement(generation=2, iterations_done=0)) is True


def test_run_stops_jobs_when_told_to(agent: Agent) -> None:
    transport = FakeTransport()
    runner = Runner([agent], [Reporter(transport)], heartbeat_every_s=60.0, tick_s=0.01)
    agent.apply(placement(generation=1, iterations=10**9))
    stop = threading.Event()
    stop.set()  # one pass of the loop, then the drain
    runner.run(stop)
    assert not agent.busy
    assert [e for _, e, _ in transport.events()] == ["started", "stopped"]
