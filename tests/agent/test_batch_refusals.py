"""What the server will never take does not hold back the node's other reports (agent/batch.py,
docs/AGENT.md §2b): an item it refuses (a 4xx in its place, or a 400 for the whole report, then
item by item) and an item too large for any report are dropped with one line each, and the items
behind them are delivered."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent import batch
from agent.batch import BatchSender
from agent.messages import JobEventReport
from agent.reporter import Reporter, TransportError
from agent.runner import Runner

from .conftest import NODE, FakeClock
from .test_batch import FakeBatchServer, make_agent

# (as a proxy might answer: over two lines; the agent logs it on one)
BAD_REQUEST = (
    '{"error":"invalid input: events: 0: reason:\n Ensure this field has no more than 2000 characters."}'
)


def failed(job_id: int, reason: str = "exit code 1") -> JobEventReport:
    return JobEventReport(NODE, job_id, 1, "failed", 0, None, reason)


def test_an_item_refused_in_its_place_does_not_block_the_later_ones() -> None:
    server = FakeBatchServer()
    server.reject = {"failed"}
    server.reject_answer = (400, "reason: Ensure this field has no more than 2000 characters.")
    reporter = Reporter(server)
    reporter.submit([failed(1), JobEventReport(NODE, 2, 1, "started", 0)])
    sender = BatchSender(server, NODE)
    assert sender.send(reporter, None, None, 0.0)
    assert server.events() == [(1, "started", 0)]
    assert reporter.pending == 0 and reporter.rejected == 1
    reporter.submit([JobEventReport(NODE, 3, 1, "started", 0)])  # and the next tick's go on
    assert sender.send(reporter, None, None, 1.0)
    assert [p["job_id"] for r in server.reports for p in r["events"]] == [1, 2, 3]


class RefusingWhole(FakeBatchServer):
    """A server that refuses a whole report holding the event of job 1 (400), and that event
    alone at the single endpoint (400); it takes everything else."""

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        if any(e["job_id"] == 1 for e in payload.get("events", [])):
            self.batch_attempts += 1
            raise TransportError(f"HTTP 400 from {path}: {BAD_REQUEST}", retryable=False, status=400)
        return super().post_json(path, payload)

    def post(self, path: str, payload: dict[str, Any]) -> None:
        if path == "/api/v1/agent/jobs/1/events/":
            raise TransportError(f"HTTP 400 from {path}: {BAD_REQUEST}", retryable=False, status=400)
        super().post(path, payload)


def test_a_report_refused_whole_is_sent_item_by_item_and_only_the_bad_item_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    agent = make_agent(clock)
    server = RefusingWhole()
    reporter = Reporter(server)
    runner = Runner([agent], [reporter], clock, heartbeat_every_s=5.0)
    reporter.submit([failed(1), JobEventReport(NODE, 2, 1, "started", 0)])
    for now in (0.0, 1.0, 2.0):
        clock.now = now
        runner.tick()
    assert "/api/v1/agent/jobs/2/events/" in [path for path, _ in server.sent]
    assert reporter.pending == 0 and reporter.rejected == 1
    assert server.batch_attempts == 1  # the next ticks' reports no longer hold it
    refusals = [r.getMessage() for r in caplog.records if "failed of job 1" in r.getMessage()]
    assert len(refusals) == 1 and "2000 characters" in refusals[0] and "\n" not in refusals[0]


def test_an_event_no_report_can_carry_is_dropped_with_one_line_and_the_rest_go_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(batch, "BUDGET_BYTES", 1000)
    server = FakeBatchServer()
    reporter = Reporter(server)
    reporter.submit([failed(1, "x" * 1500), failed(2), failed(3)])
    sender = BatchSender(server, NODE)
    with caplog.at_level(logging.ERROR, logger="agent.batch"):
        assert sender.send(reporter, None, None, 0.0)
    assert [p["job_id"] for r in server.reports for p in r["events"]] == [2, 3]
    assert reporter.pending == 0
    [line] = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"{NODE}: failed of job 1 is ") and "more than a report's 1000" in line


class HtmlPages(FakeBatchServer):
    """A server (or a proxy before it) answering every request with a 400 page over many lines."""

    PAGE = "\n<!doctype html>\n<html>\n<body>\n  <h1>Bad Request (400)</h1>\n</body>\n</html>\n"

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        raise TransportError(f"HTTP 400 from {path}: {self.PAGE}", retryable=False, status=400)

    def post(self, path: str, payload: dict[str, Any]) -> None:
        raise TransportError(f"HTTP 400 from {path}: {self.PAGE}", retryable=False, status=400)


def test_each_refusal_is_logged_on_one_line_with_the_servers_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before, a 400 page spread each of the agent's log entries over ten lines."""
    clock = FakeClock()
    agent = make_agent(clock)
    reporter = Reporter(HtmlPages())
    reporter.submit([failed(1)])
    with caplog.at_level(logging.WARNING):
        Runner([agent], [reporter], clock, heartbeat_every_s=5.0).tick()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3  # the report, the heartbeat, the event: once each
    for message in messages:
        assert "\n" not in message and "HTTP 400 from /api/v1/agent/" in message
        assert "<!doctype html> <html> <body> <h1>Bad Request (400)</h1> </body> </html>" in message
