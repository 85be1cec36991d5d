"""The agent's batch report (agent/batch.py, docs/AGENT.md §2b): one request per node and tick,
the same events, output and heartbeats as the single endpoints, refused items dropped alone, an
outage survived in order, a server without the endpoint served one request per item."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest

from agent.batch import BUDGET_BYTES, MAX_EVENTS, BatchSender
from agent.core import Agent
from agent.executors import EmulatedExecutor
from agent.gpus import declared_gpus
from agent.messages import BATCH_PATH, JobEventReport
from agent.reporter import Reporter, TokenMismatch, TokenRefused, TransportError, refusal_of_token
from agent.runner import Runner

from .conftest import NODE, FakeClock, FakeTransport, placement


class FakeBatchServer(FakeTransport):
    """A server with the batch endpoint: answers each item 200, or 409 for the event kinds in
    ``reject``; ``missing``: an older server (404 for the path). Records each report and unpacks
    its items into ``sent`` as the single endpoints would have received them."""

    def __init__(self) -> None:
        super().__init__()
        self.reports: list[dict[str, Any]] = []
        self.missing = False
        self.batch_attempts = 0
        #: The per-item answer to a rejected event (409 stale; 403 a job never placed here).
        self.reject_answer = (409, "stale generation")

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        assert path == BATCH_PATH
        self.attempts += 1
        self.batch_attempts += 1
        if self.missing:
            raise TransportError("HTTP 404 from /api/v1/agent/batch/", retryable=False, status=404)
        if self.down:
            raise TransportError("connection refused", retryable=True)
        self.reports.append(payload)
        logs, events = [], []
        for chunk in payload.get("logs", []):
            body = {k: v for k, v in chunk.items() if k != "job_id"}
            self.sent.append((f"/api/v1/agent/jobs/{chunk['job_id']}/logs/", body))
            logs.append(
                {"job_id": chunk["job_id"], "code": 200, "received": body["offset"] + len(body["data"])}
            )
        for event in payload.get("events", []):
            if event["event"] in self.reject:
                code, error = self.reject_answer
                events.append({"job_id": event["job_id"], "code": code, "error": error})
                continue
            body = {k: v for k, v in event.items() if k != "job_id"}
            self.sent.append((f"/api/v1/agent/jobs/{event['job_id']}/events/", body))
            events.append({"job_id": event["job_id"], "code": 200, "status": "running", "accepted": True})
        if "heartbeat" in payload:
            self.sent.append(("/api/v1/agent/heartbeat/", {"node": payload["node"], **payload["heartbeat"]}))
        return {"logs": logs, "events": events, "heartbeat": None}


def make_agent(clock: FakeClock) -> Agent:
    """The ``agent`` fixture's agent (tests/agent/conftest.py), a second one."""
    return Agent(NODE, declared_gpus(NODE, 4, 16_000), partial(EmulatedExecutor, speedup=10.0), clock, 1.0)


def drive(transport: FakeTransport, agent: Agent, clock: FakeClock, times: list[float]) -> Reporter:
    reporter = Reporter(transport, backoff_s=1.0, backoff_max_s=2.0)
    runner = Runner([agent], [reporter], clock, heartbeat_every_s=5.0)
    agent.apply(placement(generation=1), now=0.0)
    for now in times:
        clock.now = now
        runner.tick()
    return reporter


def test_one_request_a_tick_delivers_what_the_single_requests_deliver(clock: FakeClock) -> None:
    """The same job on two agents, one with each transport: the server receives the same events,
    output and heartbeats in the same order; the batch agent sent one request per tick."""
    ticks = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    single, batch = FakeTransport(), FakeBatchServer()
    drive(single, make_agent(clock), clock, ticks)
    clock.now = 0.0
    drive(batch, make_agent(clock), clock, ticks)
    for kind in ("/events/", "/logs/", "/heartbeat/"):  # each in the same order (the server
        # applies a report's heartbeat after its events, the single agent sends it before them)
        assert [x for x in batch.sent if kind in x[0]] == [x for x in single.sent if kind in x[0]]
    assert [e[1] for e in batch.events()] == ["started"] + ["progress"] * 4 + ["finished"]
    assert batch.attempts == len(batch.reports) <= len(ticks)  # one request a tick at most
    assert single.attempts > batch.attempts


def test_a_refused_event_is_dropped_alone(agent: Agent, clock: FakeClock) -> None:
    server = FakeBatchServer()
    server.reject = {"started"}
    reporter = drive(server, agent, clock, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    kinds = [e[1] for e in server.events()]
    assert "started" not in kinds and kinds[-1] == "finished" and "progress" in kinds
    assert reporter.rejected == 1 and reporter.pending == 0


def test_events_survive_an_outage_in_order(agent: Agent, clock: FakeClock) -> None:
    """As tests/agent/test_runner.py's outage test, through batch reports."""
    server = FakeBatchServer()
    reporter = Reporter(server, backoff_s=1.0, backoff_max_s=2.0)
    runner = Runner([agent], [reporter], clock, heartbeat_every_s=5.0)
    agent.apply(placement(generation=1), now=0.0)
    server.down = True
    for now in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0):
        clock.now = now
        runner.tick()
    assert server.sent == []
    server.down = False
    clock.now = 7.0
    runner.tick()
    assert server.events() == [(1, "started", 0), (1, "progress", 80), (1, "finished", 100)]
    assert reporter.pending == 0 and len(server.reports) == 1


def test_a_server_without_the_endpoint_gets_one_request_per_item(agent: Agent, clock: FakeClock) -> None:
    server = FakeBatchServer()
    server.missing = True
    drive(server, agent, clock, [0.0, 1.0])
    assert server.reports == []
    paths = [path for path, _ in server.sent]
    assert "/api/v1/agent/heartbeat/" in paths and "/api/v1/agent/jobs/1/events/" in paths
    assert server.batch_attempts == 1  # asked once, then never again


def test_a_backlog_is_split_into_reports_within_the_bounds() -> None:
    """500 waiting events (after an outage, say): reports of at most 200 events and 48 KiB,
    oldest first, all delivered in one tick (3 reports)."""
    server = FakeBatchServer()
    reporter = Reporter(server)
    reporter.submit(JobEventReport(NODE, j, 1, "started", 0, 0.5, "x" * 40) for j in range(500))
    assert BatchSender(server, NODE).send(reporter, None, None, 0.0)
    assert [len(r["events"]) for r in server.reports] == [MAX_EVENTS, MAX_EVENTS, 100]
    assert all(len(json.dumps(r)) <= BUDGET_BYTES for r in server.reports)
    assert [p["job_id"] for r in server.reports for p in r["events"]] == list(range(500))
    assert reporter.pending == 0


def test_reports_between_heartbeats_wait_their_interval(agent: Agent, clock: FakeClock) -> None:
    """``report_every_s=1``, ticks every 0.25 s, heartbeats every 5 s: one report at 0 s (with the
    heartbeat), then at most one a second, each with what the ticks between gathered."""
    server = FakeBatchServer()
    runner = Runner([agent], [Reporter(server)], clock, heartbeat_every_s=5.0, report_every_s=1.0)
    agent.apply(placement(generation=1), now=0.0)
    for i in range(25):  # 0 … 6 s: the job (5 s of wall time) starts, progresses, finishes
        clock.now = i * 0.25
        runner.tick()
    assert len(server.reports) <= 7  # 0, 1, 2, 3, 4, 5 (heartbeat), 6 s — against 25 ticks
    assert [e[1] for e in server.events()] == ["started"] + ["progress"] * 4 + ["finished"]


def test_a_refused_token_stops_the_batch_agent_without_falling_back(agent: Agent, clock: FakeClock) -> None:
    """A 401 to the batch report is the node token refused (agent/reporter.py): the runner raises
    ``TokenRefused`` naming the node, and sends nothing one by one (it would be refused too)."""

    class Refusing(FakeBatchServer):
        def post_json(self, path: str, payload: dict[str, Any]) -> Any:
            self.batch_attempts += 1
            raise TokenRefused('HTTP 401 from /api/v1/agent/batch/: {"error": "Invalid node token."}')

    server = Refusing()
    with pytest.raises(TokenRefused) as refused:
        drive(server, agent, clock, [0.0])
    assert refused.value.node == NODE
    assert server.batch_attempts == 1 and server.sent == []


def test_a_per_job_403_in_the_batch_answer_drops_that_event_and_the_agent_runs_on(
    agent: Agent, clock: FakeClock
) -> None:
    """Only the whole report's 403 coded ``token_node_mismatch`` stops the agent; an item's 403
    (a job never placed on this node) drops that event alone, as a 409 does."""
    server = FakeBatchServer()
    server.reject = {"started"}
    server.reject_answer = (403, f"job 1 was never placed on node {NODE}")
    reporter = drive(server, agent, clock, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    kinds = [e[1] for e in server.events()]
    assert "started" not in kinds and kinds[-1] == "finished"
    assert reporter.rejected == 1 and reporter.pending == 0 and server.batch_attempts > 1


def test_another_nodes_token_stops_the_batch_agent(agent: Agent, clock: FakeClock) -> None:
    """Before, the whole report's 403 (node-00's token, this agent ``NODE``) was one more refused
    report, sent again every tick forever; now it stops the runner as a 401 does."""
    body = json.dumps(
        {
            "error": f"this token belongs to node node-99, not {NODE}",
            "code": "token_node_mismatch",
            "token_node": "node-99",
            "node": NODE,
        }
    )

    class OtherNodes(FakeBatchServer):
        def post_json(self, path: str, payload: dict[str, Any]) -> Any:
            self.batch_attempts += 1
            refusal = refusal_of_token(403, path, body)  # what HttpTransport raises for it
            assert refusal is not None
            raise refusal

    server = OtherNodes()
    with pytest.raises(TokenMismatch) as refused:
        drive(server, agent, clock, [0.0])
    assert (refused.value.token_node, refused.value.node, refused.value.status) == ("node-99", NODE, 403)
    assert server.batch_attempts == 1 and server.sent == []
