"""Fixtures for tests against real PostgreSQL, Redis and Celery worker processes.

They run when ``DATABASE_URL`` names PostgreSQL and ``REDIS_URL`` a reachable Redis (``.ci/run``
sets both), and skip with the reason otherwise (fail under ``SHAREWISE_REQUIRE_SERVICES=1``).
Workers are ``python -m tests.integration.worker`` subprocesses using the test database.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from cluster.models import Node
from tests.conftest import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
ROUND_QUEUES = ("scheduler", "celery")


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``condition`` every 0.1 s until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture
def postgres(transactional_db: None) -> None:
    """Committed transactions on PostgreSQL (a worker process must see the test's rows)."""
    if connection.vendor != "postgresql":
        skip_or_fail("integration tests need PostgreSQL (DATABASE_URL=postgres://...)")


@pytest.fixture
def redis_client(postgres: None) -> Iterator[Any]:
    """A client of the configured Redis; the round queues are emptied before and after."""
    import redis

    url = getattr(settings, "REDIS_URL", "")
    if not url:
        skip_or_fail("integration tests need Redis (REDIS_URL=redis://...)")
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis at {url} does not answer: {exc}")
    client.delete(*ROUND_QUEUES)
    yield client
    client.delete(*ROUND_QUEUES)


@pytest.fixture
def nodes(redis_client: Any) -> Iterator[list[Node]]:
    """Two registered nodes of four 49,140 MB GPUs, with names unique to this test (their Redis
    queues ``node.<name>`` are deleted afterwards)."""
    prefix = f"it{uuid.uuid4().hex[:6]}"
    registered = [Node.register(f"{prefix}-0{i}", 4, 49_140, "v100")[0] for i in range(2)]
    yield registered
    redis_client.delete(*(f"node.{n.name}" for n in registered))


def node_messages(client: Any, node: str) -> list[dict[str, Any]]:
    """The ``apply_placement`` kwargs waiting in queue ``node.<node>``, oldest first."""
    messages = []
    for raw in reversed(client.lrange(f"node.{node}", 0, -1)):
        envelope = json.loads(raw)
        assert envelope["headers"]["task"] == "sharewise.apply_placement"
        assert envelope["content-type"] == "application/json"
        _args, kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
        messages.append(kwargs)
    return messages


def database_url() -> str:
    """A URL of the test database (the one this test process uses), for a worker process."""
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class Workers:
    """Starts Celery worker subprocesses and kills whatever is left at the end of the test."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self, pause_file: Path | None = None, visibility_s: float | None = None) -> subprocess.Popen:
        env = {**os.environ, "DATABASE_URL": database_url(), "SHAREWISE_REQUIRE_SERVICES": "0"}
        env.pop("SHAREWISE_TEST_PAUSE_FILE", None)
        env.pop("SHAREWISE_TEST_VISIBILITY_S", None)
        if pause_file is not None:
            env["SHAREWISE_TEST_PAUSE_FILE"] = str(pause_file)
        if visibility_s is not None:
            env["SHAREWISE_TEST_VISIBILITY_S"] = str(visibility_s)
        log = (self.log_dir / f"worker-{len(self.procs)}.log").open("w")
        proc = subprocess.Popen([sys.executable, "-m", "tests.integration.worker"], cwd=REPO, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.log_dir.glob("worker-*.log")))


@pytest.fixture
def workers(nodes: list[Node], tmp_path: Path) -> Iterator[Workers]:
    started = Workers(tmp_path)
    yield started
    for proc in started.procs:
        started.kill(proc)
