"""The embedded default runs for real: SQLite and no Redis, ``manage.py runserver``, ``manage.py
run_scheduler`` and a node agent running jobs as subprocesses (``python -m agent``, no broker:
it pulls its placements from ``GET /api/v1/agent/orders/``, docs/AGENT.md §1a), started as the
README's "Running the services" says.

A tenant submits the example job (``examples/jobs/steps.yaml``, a real process) with the
``sharewise`` command; it runs on the node and succeeds with its output on the server; the
agent's next poll acknowledges its order; and when the agent dies, ``run_scheduler``'s heartbeat
check takes the node out of ``ready``. Needs no service, so it runs everywhere; run again with
Redis as the broker and ``SHAREWISE_AGENT_TRANSPORT=pull`` (the pull path as an option beside a
broker) where ``REDIS_URL`` names a reachable Redis (its test database, emptied before and after).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port
from tests.integration.conftest import REPO, Subprocesses, emptied_redis, wait_for

pytestmark = pytest.mark.slow

#: Generous deadlines (s) on a loaded 2-core machine; never asserted as timings.
DEADLINE_S = 45.0
#: The server's heartbeat timeout here (s): short, so the dead agent is noticed within the test.
HEARTBEAT_TIMEOUT_S = 5.0


class Services(Subprocesses):
    """runserver, run_scheduler and the agent of this test, killed at the end."""

    kind = "svc"


@dataclass
class Embedded:
    """The running services: the API's URL, the tenant's shell, the database file, the agent."""

    api: str
    shell: dict[str, str]
    db: Path
    agent: subprocess.Popen[Any]
    procs: Services


def manage(env: dict[str, str], *args: str) -> str:
    """``python manage.py ARGS`` in the repository's root; its stdout (fails the test on error)."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture(params=["no-broker", "redis-pull"])
def broker(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment's broker settings: none (the embedded default), or Redis (this test's own
    database on the server of ``REDIS_URL``, emptied before and after) with pull chosen."""
    if request.param == "no-broker":
        yield {}
        return
    url, client = emptied_redis(os.environ.get("REDIS_URL", ""), "the redis-pull variant needs Redis")
    try:
        yield {"REDIS_URL": url, "SHAREWISE_AGENT_TRANSPORT": "pull"}
    finally:
        client.flushdb()
        client.close()


@pytest.fixture
def embedded(tmp_path: Path, broker: dict[str, str]) -> Iterator[Embedded]:
    db = tmp_path / "db.sqlite3"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REDIS_URL", "CACHE_URL", "SHAREWISE_AGENT_TRANSPORT")
    }
    env.update(broker)
    env.update(
        DATABASE_URL=f"sqlite:///{db}",
        SHAREWISE_HEARTBEAT_INTERVAL_S="0.5",
        SHAREWISE_HEARTBEAT_TIMEOUT_S=str(HEARTBEAT_TIMEOUT_S),
    )
    manage(env, "migrate", "--noinput", "-v", "0")
    node_token = manage(env, "add_node", "node-00", "--gpus", "2").strip()
    tenant_token = manage(env, "create_tenant", "team-a", "--quota-gpus", "2").strip()
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    procs = Services(tmp_path)
    procs.spawn([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"], env)
    procs.spawn([sys.executable, "manage.py", "run_scheduler", "--interval", "0.5", "--policy", "sjf"], env)
    agent = procs.spawn(
        [sys.executable, "-m", "agent", "--node", "node-00", "--gpus", "2", "--api", api]
        + ["--heartbeat-s", "0.5", "--progress-s", "0.5", "--tick-s", "0.1", "--poll-wait-s", "5"],
        {**env, "SHAREWISE_NODE_TOKEN": node_token},
    )
    shell = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO / "client" / "src"),
        "SHAREWISE_API": api,
        "SHAREWISE_TOKEN": tenant_token,
        "SHAREWISE_CONFIG": str(tmp_path / "sharewise.json"),
        "HOME": str(tmp_path),
    }
    try:
        wait_for(
            lambda: node_status(db) == "ready" and heard_from(db), DEADLINE_S, f"the agent\n{procs.logs()}"
        )
        yield Embedded(api, shell, db, agent, procs)
    finally:
        procs.kill_all()


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    """Read the services' SQLite file directly (read-only), as an operator's ``sqlite3`` would."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10) as conn:
        return conn.execute(sql).fetchall()


def node_status(db: Path) -> str:
    return str(query(db, "SELECT status FROM cluster_node WHERE name = 'node-00'")[0][0])


def heard_from(db: Path) -> bool:
    return query(db, "SELECT last_heartbeat FROM cluster_node WHERE name = 'node-00'")[0][0] is not None


def api_get(env: Embedded, path: str) -> Any:
    request = urllib.request.Request(
        env.api + path, headers={"Authorization": f"Token {env.shell['SHAREWISE_TOKEN']}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_a_real_job_runs_and_a_dead_node_leaves_ready(embedded: Embedded) -> None:
    submitted = subprocess.run(
        [sys.executable, "-m", "sharewise", "submit", "examples/jobs/steps.yaml", "-q"]
        + ["--set", "iterations=4", "--command", "python3 examples/steps.py --step-s 0.3"],
        cwd=REPO, env=embedded.shell, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    job_id = int(submitted.stdout)

    job = wait_for(
        lambda: (
            (j := api_get(embedded, f"/api/v1/jobs/{job_id}/"))["status"] in ("succeeded", "failed") and j
        ),
        DEADLINE_S,
        f"job {job_id} to end\n{embedded.procs.logs()}",
    )
    assert (job["status"], job["iterations_done"]) == ("succeeded", 4), embedded.procs.logs()
    assert "started (subprocess, placements by pull)" in embedded.procs.logs()
    log = api_get(embedded, f"/api/v1/jobs/{job_id}/logs/")["data"].splitlines()
    assert log[0] == "steps: iterations 1 to 4 on GPUs 0" and log[-1] == "steps: finished"
    # the start was pulled, applied, and acknowledged by the agent's next poll
    wait_for(
        lambda: query(embedded.db, "SELECT COUNT(*) FROM scheduling_agentorder") == [(0,)], DEADLINE_S, "ack"
    )
    assert query(embedded.db, "SELECT last_seq FROM scheduling_orderstream")[0][0] >= 1

    embedded.procs.kill(embedded.agent)  # SIGKILL: no goodbye; only the heartbeat check notices
    wait_for(
        lambda: node_status(embedded.db) == "unhealthy",
        DEADLINE_S,
        f"run_scheduler to mark the silent node unhealthy\n{embedded.procs.logs()}",
    )
    # the line follows the commit by one round (the tick prints after its round)
    wait_for(
        lambda: "node node-00 marked unhealthy (heartbeat timeout)" in embedded.procs.logs(),
        DEADLINE_S,
        f"run_scheduler to say so\n{embedded.procs.logs()}",
    )
