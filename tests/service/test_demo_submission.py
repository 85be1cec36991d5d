"""The demo's submissions: a trace's own tenants kept (any number), and 429s retried after their
``Retry-After`` (bounded), against a loopback HTTP server that throttles."""

from __future__ import annotations

import json
import threading
import urllib.error
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cluster.models import Tenant
from demo.database import prepare_database
from demo.options import DemoConfig
from demo.submit import DEFAULT_WAIT_S, MAX_WAIT_S, post_with_retry, retry_after_s, submit_jobs
from demo.workload import load_workload, tenant_names
from scheduling.core.types import Job as TraceJob
from scheduling.profiles import load_default_profile

CHRONUS_HEADER = (
    "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,"
    "expect_time_list,expect_value_list,best_effort,job_type\n"
)


def chronus_trace(path: Path, tenants: int) -> Path:
    """One 1-GPU job of 100 s per tenant ``vc_00`` … (Chronus CSV: seconds, ``user`` = tenant)."""
    rows = "".join(f"{i},vc_{i:02d},1,{i},100,resnet18,100,1,100,10,0,strict\n" for i in range(tenants))
    path.write_text(CHRONUS_HEADER + rows, encoding="utf-8")
    return path


def test_a_30_tenant_trace_keeps_its_30_tenants(tmp_path: Path) -> None:
    config = DemoConfig(trace=chronus_trace(tmp_path / "t.csv", 30))
    workload = load_workload(config, load_default_profile(), lambda _: None)
    assert [j.tenant for j in workload.jobs] == [f"vc-{i:02d}" for i in range(30)]


def test_the_rows_a_trace_loses_are_said(tmp_path: Path) -> None:
    # Row 1 runs 1e308 s (past ten years), row 2 asks for 0 GPUs: neither is replayed, and the
    # demo says so (it used to say nothing, and send the first to the API, which refused it).
    path = chronus_trace(tmp_path / "t.csv", 1)
    with path.open("a", encoding="utf-8") as fh:
        fh.write("1,vc_01,1,832,296,mobilenet_v2,1e308,8,128,10,0,strict\n")
        fh.write("2,vc_01,0,832,296,mobilenet_v2,98,8,128,10,0,strict\n")
    said: list[str] = []
    workload = load_workload(DemoConfig(trace=path), load_default_profile(), said.append)
    assert [j.id for j in workload.jobs] == [0]
    assert said == [
        "2 of 3 trace rows rejected (asks for 0 GPUs: 1; run time above ten years, 315,360,000 s: 1); "
        "neither the live run nor the simulator sees them"
    ]


def test_tenant_names_are_unique_and_valid() -> None:
    # the service's alphabet: lowercase letters, digits, inner hyphens, at most 64 characters
    assert tenant_names(["VC_6214e9", "x"]) == {"VC_6214e9": "vc-6214e9", "x": "x"}
    assert tenant_names(["a" * 70 + "_b"]) == {"a" * 70 + "_b": "a" * 64}
    # nothing left, or two names alike: tenant-N, N the position, skipping a name already taken
    assert tenant_names(["tenant-1", "__", "x"]) == {"tenant-1": "tenant-1", "__": "tenant-4", "x": "x"}
    assert tenant_names(["a b", "A_B"]) == {"a b": "tenant-0", "A_B": "tenant-1"}


@pytest.mark.django_db
def test_the_database_gets_every_tenant_with_a_token(tmp_path: Path) -> None:
    names = [f"vc-{i:02d}" for i in range(30)]
    setup = prepare_database(DemoConfig(nodes=4, gpus_per_node=8), names)
    assert sorted(Tenant.objects.values_list("name", flat=True)) == names
    assert sorted(setup.tenant_tokens) == names and len(set(setup.tenant_tokens.values())) == 30
    # 32 GPUs over 30 tenants: 1 each, the remaining 2 to the first two (sorted)
    assert setup.quotas == {n: 2 if i < 2 else 1 for i, n in enumerate(names)}


class Throttling(BaseHTTPRequestHandler):
    """Answers 429 (``Retry-After`` of the server's ``retry_after``) to the first ``refusals``
    POSTs, then ``status`` with ``{"id": 7}`` (a bulk POST: ``bulk_status`` with ids 100, 101, …
    for its jobs); records each request's Idempotency-Key, path and body."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        server = self.server
        sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server.keys.append(self.headers.get("Idempotency-Key"))  # type: ignore[attr-defined]
        server.requests.append((self.path, sent))  # type: ignore[attr-defined]
        refused = len(server.keys) <= server.refusals  # type: ignore[attr-defined]
        code, answer = 429, {"detail": "throttled"}
        if not refused and self.path.endswith("/bulk/"):
            code, answer = server.bulk_status, {"jobs": [{"id": 100 + k} for k in range(len(sent["jobs"]))]}  # type: ignore[attr-defined]
        elif not refused:
            code, answer = server.status, {"id": 7}  # type: ignore[attr-defined]
        body = json.dumps(answer).encode()
        self.send_response(code)
        if refused and server.retry_after is not None:  # type: ignore[attr-defined]
            self.send_header("Retry-After", server.retry_after)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Throttling)
    httpd.keys, httpd.refusals, httpd.retry_after, httpd.status = [], 2, "3", 201  # type: ignore[attr-defined]
    httpd.requests, httpd.bulk_status = [], 201  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def url(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/api/v1/jobs/"


def test_429_is_retried_after_retry_after_with_the_same_key(server: ThreadingHTTPServer) -> None:
    waits: list[float] = []
    answer = post_with_retry(url(server), {"a": 1}, {"Idempotency-Key": "demo-5"}, lambda s: waits.append(s))
    assert answer == {"id": 7}
    assert waits == [3.0, 3.0]
    assert server.keys == ["demo-5"] * 3  # type: ignore[attr-defined]


def test_retries_are_bounded(server: ThreadingHTTPServer) -> None:
    server.refusals = 99  # type: ignore[attr-defined]
    waits: list[float] = []
    with pytest.raises(urllib.error.HTTPError) as raised:
        post_with_retry(url(server), {}, {"Idempotency-Key": "k"}, lambda s: waits.append(s), attempts=4)
    assert raised.value.code == 429
    assert len(server.keys) == 4 and waits == [3.0] * 3  # type: ignore[attr-defined]


def test_a_stopping_demo_ends_the_retries(server: ThreadingHTTPServer) -> None:
    with pytest.raises(urllib.error.HTTPError):
        post_with_retry(url(server), {}, {"Idempotency-Key": "k"}, lambda s: True)
    assert len(server.keys) == 1  # type: ignore[attr-defined]


def test_other_errors_are_not_retried(server: ThreadingHTTPServer) -> None:
    server.refusals, server.status = 0, 400  # type: ignore[attr-defined]
    with pytest.raises(urllib.error.HTTPError) as raised:
        post_with_retry(url(server), {}, {"Idempotency-Key": "k"}, lambda s: pytest.fail("waited"))
    assert raised.value.code == 400 and len(server.keys) == 1  # type: ignore[attr-defined]


def test_a_429_without_retry_after_waits_the_default(server: ThreadingHTTPServer) -> None:
    server.retry_after, server.refusals = None, 1  # type: ignore[attr-defined]
    waits: list[float] = []
    assert post_with_retry(url(server), {}, {"Idempotency-Key": "k"}, lambda s: waits.append(s)) == {"id": 7}
    assert waits == [DEFAULT_WAIT_S]


def test_retry_after_values() -> None:
    now = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
    assert retry_after_s("5") == 5.0
    assert retry_after_s("0") == 0.0
    assert retry_after_s("-3") == 0.0
    assert retry_after_s("3600") == MAX_WAIT_S
    assert retry_after_s("Tue, 01 Dec 2026 12:00:10 GMT", now) == 10.0  # an HTTP-date 10 s ahead
    assert retry_after_s("Tue, 01 Dec 2026 11:00:00 GMT", now) == 0.0  # in the past
    assert retry_after_s("soon") == DEFAULT_WAIT_S
    assert retry_after_s(None) == DEFAULT_WAIT_S
    assert retry_after_s("nan") == DEFAULT_WAIT_S


def trace_jobs(n: int) -> list[TraceJob]:
    return [TraceJob(i, "team-a", "resnet18", 128, 1, 100, 0.0, 0.5) for i in range(n)]


def base(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}"


def test_jobs_due_together_go_in_one_bulk_request(server: ThreadingHTTPServer) -> None:
    server.refusals = 0  # type: ignore[attr-defined]
    made, refused = submit_jobs(base(server), "tok", trace_jobs(3), lambda s: False)
    assert (made, refused) == ({100: 0, 101: 1, 102: 2}, [])
    [(path, sent)] = server.requests  # type: ignore[attr-defined]
    assert path == "/api/v1/jobs/bulk/"
    assert [j["idempotency_key"] for j in sent["jobs"]] == ["demo-0", "demo-1", "demo-2"]
    assert sent["jobs"][0] == {
        "name": "job-0",
        "model": "resnet18",
        "batch_size": 128,
        "iterations": 100,
        "gpus": 1,
        "iteration_time_s": 0.5,
        "idempotency_key": "demo-0",
    }


def test_a_refused_bulk_request_is_sent_again_job_by_job(server: ThreadingHTTPServer) -> None:
    server.refusals, server.bulk_status = 0, 400  # type: ignore[attr-defined]
    made, refused = submit_jobs(base(server), "tok", trace_jobs(2), lambda s: False)
    assert refused == [] and made == {7: 1}  # both answered id 7 by the stub: the last one kept
    assert [p for p, _ in server.requests] == ["/api/v1/jobs/bulk/"] + ["/api/v1/jobs/"] * 2  # type: ignore[attr-defined]
    assert server.keys[1:] == ["demo-0", "demo-1"]  # type: ignore[attr-defined]


def test_one_job_is_a_plain_post(server: ThreadingHTTPServer) -> None:
    server.refusals = 1  # type: ignore[attr-defined]
    made, refused = submit_jobs(base(server), "tok", trace_jobs(1), lambda s: False)
    assert (made, refused) == ({7: 0}, [])
    assert [p for p, _ in server.requests] == ["/api/v1/jobs/"] * 2  # type: ignore[attr-defined]
