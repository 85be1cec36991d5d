"""The demo's requests: its web server keeps a worker thread's database connection between
requests (Django's threaded server opened one per request); it sends a trace job's priority and
``sharing: never``, and the jobs due together in bulks per tenant."""

from __future__ import annotations

import errno
import socket
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.servers.basehttp import WSGIRequestHandler
from django.db import connection

from demo.live import serve, wait_until_ready
from demo.options import DemoError
from demo.submit import job_body
from demo.webserver import PooledWSGIServer
from scheduling.core.types import Job as TraceJob


class Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass


def connection_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """Answers the identity of this thread's open database connection (a query opens it;
    Django's end-of-request handling then keeps or closes it)."""
    from django.core import signals

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    answer = str(id(connection.connection)).encode()
    signals.request_finished.send(sender=None)  # what Django's handler sends after a response
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [answer]


@pytest.fixture
def server() -> Iterator[PooledWSGIServer]:
    srv = PooledWSGIServer(("127.0.0.1", 0), Quiet, workers=1)
    srv.set_app(connection_app)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(timeout=5)


@pytest.mark.django_db(transaction=True)
def test_one_worker_serves_every_request_on_one_connection(server: PooledWSGIServer) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    seen = {urllib.request.urlopen(url, timeout=10).read() for _ in range(5)}
    assert len(seen) == 1  # Django's ThreadedWSGIServer: a new connection (and thread) each time


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        PooledWSGIServer(("127.0.0.1", 0), Quiet, workers=0)


def test_a_job_body_carries_priority_and_no_sharing() -> None:
    plain = TraceJob(7, "t", "resnet50", 64, 1, 10, 0.0, 0.02)
    assert "priority" not in job_body(plain) and "sharing" not in job_body(plain)
    urgent = TraceJob(8, "t", "resnet50", 64, 20, 10, 0.0, 0.1, priority=100, sharing_allowed=False)
    body = job_body(urgent)
    assert body["priority"] == 100 and body["sharing"] == "never"
    assert body["iterations"] * body["iteration_time_s"] == pytest.approx(1.0)  # a 1 s job


def test_due_jobs_go_per_tenant_in_bulks_of_at_most_the_size() -> None:
    from demo.live import due_batches

    due = [TraceJob(i, "a" if i % 3 else "b", "resnet50", 64, 1, 10, 0.0, 0.02) for i in range(12)]
    batches = due_batches(due, size=3)
    a = [i for i in range(12) if i % 3]  # 8 jobs of a: 3 + 3 + 2
    b = [0, 3, 6, 9]  # 4 jobs of b (the first job's tenant comes first): 3 + 1
    assert [(t, [j.id for j in js]) for t, js in batches] == [
        ("b", b[:3]),
        ("b", b[3:]),
        ("a", a[:3]),
        ("a", a[3:6]),
        ("a", a[6:]),
    ]
    with pytest.raises(ValueError):
        due_batches(due, size=0)


def test_a_taken_port_is_the_demos_one_line_not_a_traceback() -> None:
    # TCPServer calls server_close when its bind fails; the server's close looked for workers not
    # made yet, and an AttributeError hid the OSError: `scripts/demo.sh --port P` with P taken
    # ended in a traceback
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(OSError) as refused:
            PooledWSGIServer(("127.0.0.1", port), Quiet, workers=1)
        assert refused.value.errno == errno.EADDRINUSE
        with pytest.raises(DemoError, match=rf"^cannot listen on 127\.0\.0\.1:{port} \(.+\); pass --port N$"):
            serve("127.0.0.1", port)
    finally:
        taken.close()


def test_waiting_for_a_web_service_that_does_not_answer_says_so_once_then_names_why() -> None:
    """``manage.py demo --api URL`` with nothing listening was silent for 120 s, then said only
    that /readyz did not answer (a fresh user's trial)."""
    with socket.socket() as probe:  # a port nobody listens on: bound, then released
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    said: list[str] = []
    with pytest.raises(DemoError) as raised:
        wait_until_ready(f"http://127.0.0.1:{port}", timeout_s=0.3, say=said.append, poll_s=0.05)
    assert len(said) == 1 and said[0].startswith(
        f"waiting for the web service at http://127.0.0.1:{port} to answer /readyz (up to 0.3 s): "
    )
    assert "refused" in said[0].lower()
    message = str(raised.value)
    assert message.startswith(
        f"the web service at http://127.0.0.1:{port} did not answer /readyz within 0.3 s ("
    )
    assert "refused" in message.lower()


def test_a_web_service_that_is_ready_is_not_waited_for(server: PooledWSGIServer) -> None:
    said: list[str] = []
    server.set_app(ready_app)
    wait_until_ready(f"http://127.0.0.1:{server.server_address[1]}", timeout_s=5, say=said.append)
    assert said == []


def ready_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "application/json")])
    return [b'{"status": "ok"}']
