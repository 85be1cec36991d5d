"""Fixtures for tests against real PostgreSQL, Redis and Celery worker processes.

They run when ``DATABASE_URL`` names PostgreSQL and ``REDIS_URL`` a reachable Redis (``.ci/run``
sets both), and skip with the reason otherwise (fail under ``SHAREWISE_REQUIRE_SERVICES=1``).
Workers are ``python -m tests.integration.worker`` subprocesses using the test database.

Redis: the tests and their workers use a database of their own on the server of ``REDIS_URL``
(:func:`integration_redis_url`), emptied before and after each test, so no message, unacknowledged
delivery (``unacked``) or restore mutex of a test is left where a later worker would find it, and
nothing left by other users of ``REDIS_URL`` reaches a test's worker.
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
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import connection

from cluster.models import Node
from scheduling.service import ROUND_REQUEST_KEY
from tests.conftest import skip_or_fail

REPO = Path(__file__).resolve().parents[2]
#: Redis database the integration tests use (on the server of ``REDIS_URL``); the neighbour below
#: it when ``REDIS_URL`` itself names this one. The agent tests use 15 by default. Environment
#: variable ``SHAREWISE_TEST_REDIS_DB`` chooses another (two test runs sharing one Redis server).
INTEGRATION_REDIS_DB = int(os.environ.get("SHAREWISE_TEST_REDIS_DB", "14"))


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


def integration_redis_url(url: str) -> str:
    """``url`` (``redis://[user:password@]host[:port][/db][?query]``) with its database number
    replaced by :data:`INTEGRATION_REDIS_DB` (or the one below it if ``url`` names that one)."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    db = INTEGRATION_REDIS_DB if path != str(INTEGRATION_REDIS_DB) else INTEGRATION_REDIS_DB - 1
    return urlunsplit(parts._replace(path=f"/{db}"))


def use_broker(url: str) -> None:
    """Point this process's Celery app at ``url``: the next send takes a connection from kombu's
    pool for that URL (the pools of other URLs stay open for their next use)."""
    from config.celery import app

    app.conf.broker_url = url
    app._after_fork()  # forgets the app's connection and producer pools, which are per URL


def emptied_redis(base_url: str, why: str) -> tuple[str, Any]:
    """This test's own Redis database on the server of ``base_url`` (:func:`integration_redis_url`)
    and a client of it, emptied; skips (or fails where services are required) with ``why`` when
    no URL is set or the server does not answer."""
    import redis

    if not base_url:
        skip_or_fail(f"{why} (REDIS_URL=redis://...)")
    url = integration_redis_url(base_url)
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis at {url} does not answer: {exc}")
    client.flushdb()
    return url, client


@pytest.fixture
def redis_client(postgres: None) -> Iterator[Any]:
    """A client of this test's own Redis database (:func:`integration_redis_url`), which is emptied
    before and after the test; while it runs, this process's Celery app sends there too."""

    from config.celery import app

    url, client = emptied_redis(getattr(settings, "REDIS_URL", ""), "integration tests need Redis")
    # a round requested by an earlier test must not make this test's requests no-ops
    cache.delete(ROUND_REQUEST_KEY)
    previous = app.conf.broker_url
    use_broker(url)
    try:
        yield client
    finally:
        use_broker(previous)
        client.flushdb()
        client.close()


@pytest.fixture
def nodes(redis_client: Any) -> list[Node]:
    """Two registered nodes of four 49,140 MB GPUs, with names unique to this test (their Redis
    queues ``node.<name>`` go with the test's Redis database)."""
    prefix = f"it{uuid.uuid4().hex[:6]}"
    return [Node.register(f"{prefix}-0{i}", 4, 49_140, "v100")[0] for i in range(2)]


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


class Subprocesses:
    """Test subprocesses (each in its own process group, output in ``log_dir/<kind>-N.log``),
    killed with SIGKILL by :meth:`kill_all` at the end of the test."""

    kind = "proc"

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []

    def spawn(self, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = (self.log_dir / f"{self.kind}-{len(self.procs)}.log").open("w")
        proc = subprocess.Popen(
            args, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def kill_all(self) -> None:
        for proc in self.procs:
            self.kill(proc)

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.log_dir.glob(f"{self.kind}-*.log")))


class Workers(Subprocesses):
    """Starts Celery worker subprocesses and kills whatever is left at the end of the test."""

    kind = "worker"

    def __init__(self, log_dir: Path, redis_url: str) -> None:
        super().__init__(log_dir)
        self.redis_url = redis_url

    def start(self, pause_file: Path | None = None, visibility_s: float | None = None) -> subprocess.Popen:
        # The tests' nodes have no agent sending heartbeats: a worker that starts slowly on a
        # loaded machine must not find them silent for too long (unreachable, nothing placed).
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": self.redis_url,
            "SHAREWISE_REQUIRE_SERVICES": "0",
            "SHAREWISE_HEARTBEAT_TIMEOUT_S": "3600",
        }
        env.pop("SHAREWISE_TEST_PAUSE_FILE", None)
        env.pop("SHAREWISE_TEST_VISIBILITY_S", None)
        if pause_file is not None:
            env["SHAREWISE_TEST_PAUSE_FILE"] = str(pause_file)
        if visibility_s is not None:
            env["SHAREWISE_TEST_VISIBILITY_S"] = str(visibility_s)
        return self.spawn([sys.executable, "-m", "tests.integration.worker"], env)


@pytest.fixture
def workers(nodes: list[Node], redis_client: Any, tmp_path: Path) -> Iterator[Workers]:
    """Starts workers on the test database and the test's Redis database; kills them afterwards
    (before ``redis_client`` empties that database)."""
    started = Workers(tmp_path, integration_redis_url(settings.REDIS_URL))
    yield started
    started.kill_all()
