"""The agent tells the server how long its previous report took (docs/AGENT.md §3,
``report_latency_s``): timed on the reporter's monotonic clock from send to answer (or failure),
rounded to 0.1 s, sent with the next heartbeat, by the heartbeat endpoint and in a batch report
alike. The fake transports below take a scripted time on the fake clock for each report."""

from __future__ import annotations

from functools import partial
from typing import Any

from agent.core import Agent
from agent.executors import EmulatedExecutor
from agent.gpus import declared_gpus
from agent.messages import MAX_REPORT_LATENCY_S, Heartbeat
from agent.reporter import Reporter, TransportError
from agent.runner import Runner

from .conftest import FakeClock, FakeTransport, placement
from .test_batch import FakeBatchServer

HEARTBEAT_PATH = Heartbeat.path


class SlowTransport(FakeTransport):
    """A heartbeat endpoint whose answers take ``takes[i]`` s of ``clock`` for the i-th heartbeat
    (a negative one: it fails after that long, as a timeout does); events answer at once."""

    def __init__(self, clock: FakeClock, takes: list[float]) -> None:
        super().__init__()
        self.clock = clock
        self.takes = list(takes)

    def post(self, path: str, payload: dict[str, Any]) -> None:
        if path != HEARTBEAT_PATH:
            return super().post(path, payload)
        took = self.takes.pop(0)
        self.clock.now += abs(took)
        if took < 0:
            raise TransportError("timed out", retryable=True)
        return super().post(path, payload)


class SlowBatchServer(FakeBatchServer):
    """The batch endpoint, each report taking ``takes[i]`` s of ``clock``."""

    def __init__(self, clock: FakeClock, takes: list[float]) -> None:
        super().__init__()
        self.clock = clock
        self.takes = list(takes)

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        self.clock.now += self.takes.pop(0)
        return super().post_json(path, payload)


def sent_latencies(sent: list[tuple[str, dict[str, Any]]]) -> list[float]:
    return [body["report_latency_s"] for path, body in sent if path == HEARTBEAT_PATH]


def test_the_heartbeat_endpoint_gets_the_previous_heartbeats_time(agent: Agent, clock: FakeClock) -> None:
    """Heartbeats at 0, 30, 60, 90 s taking 20.04 s, 3.46 s, a failure after 4 s, and 0.01 s: each
    carries the previous one's time, rounded to 0.1 s (0 for the first)."""
    transport = SlowTransport(clock, [20.04, 3.46, -4.0, 0.01])
    reporter = Reporter(transport, clock=clock)
    runner = Runner([agent], [reporter], clock, heartbeat_every_s=5.0)
    for start in (0.0, 30.0, 60.0, 90.0):
        clock.now = start
        runner.tick()
    # the third one failed: it is not received, but its 4 s are told with the fourth
    assert sent_latencies(transport.sent) == [0.0, 20.0, 4.0]
    assert reporter.report_latency_s == 0.0  # the fourth's 0.01 s, rounded


def test_a_batch_report_carries_the_previous_reports_time(agent: Agent, clock: FakeClock) -> None:
    """Reports at 0 s (heartbeat and the job's start, 20.04 s), 21 s (its end, between heartbeats:
    7.77 s), 30 s (heartbeat, 1.2 s) and 60 s (heartbeat): each heartbeat carries the time of the
    report before it, a heartbeat's or not."""
    server = SlowBatchServer(clock, [20.04, 7.77, 1.2, 0.0])
    reporter = Reporter(server, clock=clock)
    runner = Runner([agent], [reporter], clock, heartbeat_every_s=25.0)
    agent.apply(placement(generation=1), now=0.0)
    for start in (0.0, 21.0, 30.0, 60.0):
        clock.now = start
        runner.tick()
    with_heartbeat = [r for r in server.reports if "heartbeat" in r]
    assert [r["heartbeat"]["report_latency_s"] for r in with_heartbeat] == [0.0, 7.8, 1.2]
    assert len(server.reports) == 4 and "heartbeat" not in server.reports[1]
    assert all(r["node"] == agent.node for r in server.reports)
    assert server.batch_attempts == 4


def test_the_latency_sent_is_bounded(clock: FakeClock) -> None:
    """A report that hung longer than the server accepts is told as the bound (an hour)."""
    transport = SlowTransport(clock, [5000.0])
    reporter = Reporter(transport, clock=clock)
    beat = Heartbeat("node-00", (), ())
    assert reporter.heartbeat(beat, 0.0)
    assert reporter.report_latency_s == MAX_REPORT_LATENCY_S
    assert reporter.stamped(beat).payload()["report_latency_s"] == 3600.0


def test_a_fleets_nodes_tell_the_whole_pass(agent: Agent, clock: FakeClock) -> None:
    """One loop for two nodes (``--fleet``): node-00's report takes 10 s, then node-01's 10 s; the
    server reads each node's reports a whole pass (20 s) apart, and each says so next time."""
    other = Agent("node-01", declared_gpus("node-01", 4, 16_000), partial(EmulatedExecutor), clock, 1.0)
    servers = [SlowBatchServer(clock, [10.0, 0.0]), SlowBatchServer(clock, [10.0, 0.0])]
    reporters = [Reporter(s, clock=clock) for s in servers]
    runner = Runner([agent, other], reporters, clock, heartbeat_every_s=5.0)
    for start in (0.0, 30.0):
        clock.now = start
        runner.tick()
    assert [[r["heartbeat"]["report_latency_s"] for r in s.reports] for s in servers] == [
        [0.0, 20.0],
        [0.0, 20.0],
    ]
