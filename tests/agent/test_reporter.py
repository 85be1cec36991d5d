"""The outbox: ordered delivery, retries with backoff, 4xx dropped, nothing silently lost."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agent.messages import Heartbeat, JobEventReport
from agent.reporter import (
    HttpTransport,
    NodeTokenNotSeen,
    Reporter,
    TokenMismatch,
    TokenRefused,
    TransportError,
)

from .conftest import FakeTransport


def event(kind: str, done: int, job_id: int = 1, generation: int = 1) -> JobEventReport:
    return JobEventReport("node-00", job_id, generation, kind, done, 0.5)  # type: ignore[arg-type]


def test_events_wait_while_the_server_is_down_and_go_out_in_order() -> None:
    transport = FakeTransport()
    reporter = Reporter(transport, backoff_s=1.0, backoff_max_s=4.0)
    transport.down = True
    reporter.submit([event("started", 0), event("progress", 10)])
    assert reporter.flush(0.0) == 0
    # Backoff 1 s, then 2 s, then 4 s (the cap), then 4 s: attempts at 0, 1, 3, 7, 11.
    assert reporter.retry_at == 1.0
    assert reporter.flush(0.5) == 0 and transport.attempts == 1  # too early: not even tried
    reporter.flush(1.0)
    assert reporter.retry_at == 3.0
    reporter.flush(3.0)
    assert reporter.retry_at == 7.0
    reporter.flush(7.0)
    assert reporter.retry_at == 11.0
    assert transport.attempts == 4
    reporter.submit([event("progress", 30), event("finished", 100)])
    transport.down = False
    assert reporter.flush(11.0) == 3
    # progress 10 was superseded by progress 30 while waiting; the order is kept.
    assert transport.events() == [(1, "started", 0), (1, "progress", 30), (1, "finished", 100)]
    assert reporter.pending == 0


def test_a_refused_event_is_dropped_and_the_rest_delivered() -> None:
    transport = FakeTransport()
    transport.reject = {"progress"}  # e.g. 409: stale generation
    reporter = Reporter(transport)
    reporter.submit([event("started", 0), event("progress", 5), event("finished", 100)])
    assert reporter.flush(0.0) == 2
    assert transport.events() == [(1, "started", 0), (1, "finished", 100)]
    assert reporter.rejected == 1 and reporter.pending == 0


def test_progress_of_different_jobs_is_not_merged() -> None:
    transport = FakeTransport()
    transport.down = True
    reporter = Reporter(transport)
    reporter.submit([event("progress", 5, job_id=1), event("progress", 7, job_id=2)])
    assert reporter.pending == 2


def test_a_full_outbox_drops_the_oldest_progress_first_and_counts_it() -> None:
    transport = FakeTransport()
    transport.down = True
    reporter = Reporter(transport, max_events=3)
    reporter.submit(
        [event("started", 0, job_id=1), event("progress", 5, job_id=1), event("started", 0, job_id=2)]
    )
    reporter.submit([event("finished", 10, job_id=1)])
    assert reporter.dropped == 1
    transport.down = False
    reporter.flush(1e9)
    assert [(p["event"], p["iterations_done"]) for _, p in transport.sent] == [
        ("started", 0),
        ("started", 0),
        ("finished", 10),
    ]


def test_a_heartbeat_that_lands_ends_the_backoff() -> None:
    transport = FakeTransport()
    reporter = Reporter(transport, backoff_s=30.0)
    transport.down = True
    reporter.submit([event("started", 0)])
    reporter.flush(0.0)
    assert reporter.retry_at == 30.0
    transport.down = False
    assert reporter.heartbeat(Heartbeat("node-00", (), ()), now=5.0) is True
    assert reporter.flush(5.0) == 1


# -- the HTTP transport against a real local HTTP server ----------------------------------------


class _Handler(BaseHTTPRequestHandler):
    status = 201
    body = b""  # the answer's body, when not the status's default
    received: list[tuple[str, dict[str, Any], str | None]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.path, body, self.headers.get("Authorization")))
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        bodies = {409: b'{"error": "stale generation"}', 401: b'{"error": "Invalid node token."}'}
        self.wfile.write(self.body or bodies.get(self.status, b"{}"))

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    _Handler.received = []
    _Handler.status = 201
    _Handler.body = b""
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_http_transport_posts_json_with_the_node_token(server: ThreadingHTTPServer) -> None:
    transport = HttpTransport(f"http://127.0.0.1:{server.server_port}/", "s3cret")
    transport.post("/api/v1/agent/jobs/3/events/", {"event": "started"})
    assert _Handler.received == [("/api/v1/agent/jobs/3/events/", {"event": "started"}, "Node s3cret")]


@pytest.mark.parametrize(("status", "retryable"), [(409, False), (400, False), (429, True), (503, True)])
def test_http_transport_classifies_errors(server: ThreadingHTTPServer, status: int, retryable: bool) -> None:
    _Handler.status = status
    transport = HttpTransport(f"http://127.0.0.1:{server.server_port}", "t")
    with pytest.raises(TransportError) as info:
        transport.post("/x/", {})
    assert (info.value.status, info.value.retryable) == (status, retryable)


def test_a_401_is_a_refused_token_not_a_dropped_report(server: ThreadingHTTPServer) -> None:
    """401: the token is wrong or revoked. Before, it was one more 4xx: the event was dropped
    and the next one tried, forever; now it propagates and the event stays for a later agent."""
    _Handler.status = 401
    transport = HttpTransport(f"http://127.0.0.1:{server.server_port}", "revoked")
    with pytest.raises(TokenRefused) as info:
        transport.post("/api/v1/agent/heartbeat/", {})
    assert (info.value.status, info.value.retryable) == (401, False)
    assert str(info.value) == 'HTTP 401 from /api/v1/agent/heartbeat/: {"error": "Invalid node token."}'
    reporter = Reporter(transport)
    reporter.submit([event("started", 0)])
    with pytest.raises(TokenRefused):
        reporter.flush(0.0)
    assert reporter.pending == 1 and reporter.rejected == 0
    with pytest.raises(TokenRefused):
        reporter.heartbeat(Heartbeat("node-00", (), ()), now=0.0)


def test_a_coded_403_is_another_nodes_token_and_stops_like_a_401(server: ThreadingHTTPServer) -> None:
    """node-00's valid token given to node-01's agent: the heartbeat's 403 used to be logged and
    sent again every 5 s forever. The server's ``code`` (not its wording) tells it apart."""
    _Handler.status = 403
    _Handler.body = json.dumps(
        {
            "error": "this token belongs to node node-00, not node-01",
            "code": "token_node_mismatch",
            "token_node": "node-00",
            "node": "node-01",
        }
    ).encode()
    transport = HttpTransport(f"http://127.0.0.1:{server.server_port}", "node-00s")
    reporter = Reporter(transport)
    with pytest.raises(TokenMismatch) as info:
        reporter.heartbeat(Heartbeat("node-01", (), ()), now=0.0)
    assert (info.value.status, info.value.retryable) == (403, False)
    assert (info.value.token_node, info.value.node) == ("node-00", "node-01")
    assert str(info.value) == (
        "HTTP 403 from /api/v1/agent/heartbeat/: this token belongs to node node-00, not node-01"
    )
    reporter.submit([event("started", 0)])
    with pytest.raises(TokenMismatch):
        reporter.flush(0.0)
    assert reporter.pending == 1 and reporter.rejected == 0


def test_a_403_coded_node_token_required_stops_like_a_401(server: ThreadingHTTPServer) -> None:
    """The server received other credentials than the agent's ``Node <token>`` (a proxy replaced
    the header): each report would get the same 403, so the agent stops instead of dropping
    them one by one."""
    _Handler.status = 403
    _Handler.body = json.dumps(
        {
            "error": "this endpoint takes a node agent's token, sent as 'Authorization: Node "
            "<token>' (printed when the node was registered), not 'Basic' credentials",
            "code": "node_token_required",
        }
    ).encode()
    reporter = Reporter(HttpTransport(f"http://127.0.0.1:{server.server_port}", "node-00s"))
    with pytest.raises(NodeTokenNotSeen) as info:
        reporter.heartbeat(Heartbeat("node-00", (), ()), now=0.0)
    assert (info.value.status, info.value.retryable) == (403, False)
    assert str(info.value).startswith("HTTP 403 from /api/v1/agent/heartbeat/: this endpoint takes a node")
    reporter.submit([event("started", 0)])
    with pytest.raises(NodeTokenNotSeen):
        reporter.flush(0.0)
    assert reporter.pending == 1 and reporter.rejected == 0


@pytest.mark.parametrize(
    "body", [b'{"error": "job 7 was never placed on node node-01"}', b"not json", b'["token_node_mismatch"]']
)
def test_a_403_for_one_job_drops_that_event_and_goes_on(server: ThreadingHTTPServer, body: bytes) -> None:
    """A job never placed on this node (or a 403 without the code): that event only is
    dropped, the agent keeps reporting."""
    _Handler.status = 403
    _Handler.body = body
    reporter = Reporter(HttpTransport(f"http://127.0.0.1:{server.server_port}", "t"))
    reporter.submit([event("started", 0), event("finished", 1)])
    assert reporter.flush(0.0) == 0
    assert reporter.pending == 0 and reporter.rejected == 2
    assert not reporter.heartbeat(Heartbeat("node-01", (), ()), now=0.0)  # logged, not raised


def test_http_transport_retries_a_refused_connection() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), _Handler) as closed:
        port = closed.server_port  # bound then closed: nothing listens there any more
    with pytest.raises(TransportError) as info:
        HttpTransport(f"http://127.0.0.1:{port}", "t", timeout_s=2.0).post("/x/", {})
    assert info.value.retryable and info.value.status is None


def test_http_transport_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        HttpTransport("ftp://x", "t")
    with pytest.raises(ValueError, match="token is empty"):
        HttpTransport("http://x", "")
