"""Every ``reason`` the agent sends is one the server takes (agent/messages.py
``short_reason``): at most ``MAX_REASON_CHARS`` characters, no NUL, no lone surrogate — and a
backlog of the longest ones still goes in reports under the body limit."""

from __future__ import annotations

import json

from agent.batch import BUDGET_BYTES, BatchSender
from agent.messages import MAX_REASON_CHARS, REASON_CUT, JobEventReport, short_reason
from agent.reporter import Reporter

from .conftest import NODE
from .test_batch import FakeBatchServer

#: The server's body limit (``DATA_UPLOAD_MAX_MEMORY_SIZE``, bytes).
BODY_LIMIT = 64 * 1024


def test_a_long_reason_keeps_its_beginning_and_is_cut_in_characters() -> None:
    assert short_reason("x" * MAX_REASON_CHARS) == "x" * MAX_REASON_CHARS
    cut = short_reason("\u2603" * 5000)
    assert len(cut) == MAX_REASON_CHARS
    assert cut == "\u2603" * (MAX_REASON_CHARS - len(REASON_CUT)) + REASON_CUT
    # a character beyond the BMP is one character, never half of one
    assert short_reason("\U0001f600" * 3000)[:3] == "\U0001f600" * 3


def test_characters_the_server_cannot_store_are_replaced() -> None:
    assert short_reason("exit code 1: a\x00b") == "exit code 1: a\ufffdb"
    assert short_reason("cannot start 'caf\udce9'") == "cannot start 'caf\ufffd'"


def test_every_event_carries_a_reason_the_server_takes() -> None:
    event = JobEventReport(NODE, 1, 1, "failed", 0, None, "e" * 10_000)
    assert len(event.reason) == MAX_REASON_CHARS
    assert len(event.payload()["reason"]) == MAX_REASON_CHARS


def test_a_backlog_of_the_longest_reasons_goes_in_reports_under_the_body_limit() -> None:
    # each reason escapes to 12 bytes a character in JSON (a surrogate pair): about 24 KB an event
    server = FakeBatchServer()
    reporter = Reporter(server)
    reporter.submit(JobEventReport(NODE, i, 1, "failed", 0, None, "\U0001f600" * 3000) for i in range(10))
    sender = BatchSender(server, NODE)
    for tick in range(5):
        sender.send(reporter, None, None, float(tick))
    assert reporter.pending == 0
    assert [p["job_id"] for p in (e for r in server.reports for e in r["events"])] == list(range(10))
    for report in server.reports:
        assert len(json.dumps(report).encode()) <= BUDGET_BYTES < BODY_LIMIT
