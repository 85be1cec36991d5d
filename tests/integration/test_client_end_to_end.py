"""A tenant's day, as a new user would live it, on real processes: gunicorn (the web service),
``manage.py run_scheduler`` (rounds), a node agent running jobs as subprocesses (``python -m agent``,
no emulation) with Redis as its broker, and the ``sharewise`` command (``python -m sharewise``).

The tenant submits the example job (``examples/jobs/steps.yaml``, a real process printing its
steps) and a second one that cannot start while the first holds the node's two GPUs;
``sharewise list`` says why the second waits; ``sharewise logs --follow`` prints the first job's
output until it ends; the second then runs, and ``sharewise cancel`` stops its process (its log
ends with the SIGTERM the job received). Rounds use ``sjf`` (no co-location), so the second job
surely waits. Runs where PostgreSQL and Redis are (``.ci/run``); skips with the reason elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from cluster.models import Job, Node, Tenant
from tests.conftest import free_port
from tests.integration.conftest import REPO, Subprocesses, database_url, integration_redis_url, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

#: Generous deadlines (s) on a loaded 2-core machine; never asserted as timings.
DEADLINE_S = 90.0


class Cluster(Subprocesses):
    """The service's processes for this test (web, scheduler, agent), killed at the end."""

    kind = "proc"


@pytest.fixture
def cluster(redis_client: Any, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A registered 2-GPU node with its agent, the web service and the scheduler; yields the
    environment a tenant's shell would have (``SHAREWISE_API``, ``SHAREWISE_TOKEN``)."""
    name = f"e2e{uuid.uuid4().hex[:6]}"
    _, node_token = Node.register(name, 2, 16_000, "v100")
    _, token = Tenant.create_with_owner("team-a", quota_gpus=2, username="alice")
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    broker = integration_redis_url(settings.REDIS_URL)
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": broker,
        "SHAREWISE_REQUIRE_SERVICES": "0",
        "SHAREWISE_ROUND_INTERVAL_S": "0.5",
        "SHAREWISE_HEARTBEAT_INTERVAL_S": "0.5",
    }
    procs = Cluster(tmp_path)
    procs.spawn(
        [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}"]
        + ["--worker-class", "gthread", "--workers", "1", "--threads", "4"],
        env,
    )
    procs.spawn([sys.executable, "manage.py", "run_scheduler", "--interval", "0.5", "--policy", "sjf"], env)
    agent_env = {**env, "SHAREWISE_NODE_TOKEN": node_token}
    procs.spawn(
        [sys.executable, "-m", "agent", "--node", name, "--gpus", "2", "--api", api, "--broker", broker]
        + ["--heartbeat-s", "0.5", "--progress-s", "0.5", "--tick-s", "0.1", "--stop-grace-s", "5"]
        + ["--log-level", "WARNING"],
        agent_env,
    )
    shell = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(REPO / "client" / "src"),
        "SHAREWISE_API": api,
        "SHAREWISE_TOKEN": token,
        "SHAREWISE_CONFIG": str(tmp_path / "sharewise.json"),
        "HOME": str(tmp_path),
    }
    try:
        wait_for(
            lambda: sharewise(shell, "whoami").returncode == 0, DEADLINE_S, f"the web service\n{procs.logs()}"
        )
        wait_for(
            lambda: Node.objects.get(name=name).executor == "subprocess",
            DEADLINE_S,
            f"the agent's first heartbeat\n{procs.logs()}",
        )
        yield shell
    finally:
        procs.kill_all()


def sharewise(shell: dict[str, str], *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m sharewise ARGS`` in the repository's root, as the tenant's shell would."""
    return subprocess.run(
        [sys.executable, "-m", "sharewise", *args],
        cwd=REPO,
        env=shell,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def status(shell: dict[str, str], job_id: int) -> Any:
    shown = sharewise(shell, "show", str(job_id), "-o", "json")
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)


def test_a_tenant_submits_follows_lists_and_cancels(cluster: dict[str, str]) -> None:
    shell = cluster
    # The first job: 12 steps of 0.3 s on both GPUs.
    first = sharewise(
        shell, "submit", "examples/jobs/steps.yaml", "--gpus", "2", "--set", "iterations=12", "-q",
        "--command", "python3 examples/steps.py --step-s 0.3 --name first",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    first_id = int(first.stdout)
    wait_for(lambda: status(shell, first_id)["status"] == "running", DEADLINE_S, "the first job running")

    # The second cannot start while the first holds the node: `list` says why.
    second = sharewise(
        shell, "submit", "examples/jobs/steps.yaml", "--name", "second", "--set", "iterations=200", "-q",
        "--command", "python3 examples/steps.py --step-s 0.3 --name second",
    )  # fmt: skip
    second_id = int(second.stdout)
    waiting = wait_for(
        lambda: (j := status(shell, second_id))["pending_reason"] not in (None, "not yet considered") and j,
        DEADLINE_S,
        "a round to consider the second job",
    )
    assert waiting["status"] == "pending"
    listed = sharewise(shell, "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.split()[:1] == [str(second_id)])
    assert "pending" in row and waiting["pending_reason"] in row

    # Its output, followed until the job has ended.
    followed = sharewise(shell, "logs", str(first_id), "--follow", timeout_s=DEADLINE_S)
    assert followed.returncode == 0, followed.stderr
    lines = followed.stdout.splitlines()
    assert lines[0] == "first: iterations 1 to 12 on GPUs 0,1"
    assert "first: iteration 12/12 done" in lines and lines[-1] == "first: finished"
    assert "SHAREWISE_PROGRESS iterations_done=12" in followed.stdout
    wait_for(lambda: status(shell, first_id)["status"] == "succeeded", DEADLINE_S, "the first job succeeded")

    # The second job runs next; cancelling it stops its process.
    wait_for(
        lambda: "second: iteration 1/200 done" in sharewise(shell, "logs", str(second_id)).stdout,
        DEADLINE_S,
        "the second job's first step",
    )
    cancelled = sharewise(shell, "cancel", str(second_id))
    assert cancelled.returncode == 0 and cancelled.stdout.strip() == f"Cancelled job {second_id} (second)"
    tail = sharewise(shell, "logs", str(second_id), "--follow", timeout_s=DEADLINE_S)
    assert tail.returncode == 0
    assert "second: stopped by SIGTERM after iteration" in tail.stdout
    job = Job.objects.get(pk=second_id)
    assert job.status == Job.Status.CANCELLED and job.iterations_done < 200
    assert sharewise(shell, "show", "999999").returncode == 3
