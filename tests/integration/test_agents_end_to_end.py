"""Jobs end to end on real PostgreSQL, Redis and node agent processes (docs/AGENT.md, TESTING.md
"Faults"): jobs submitted over REST (a live HTTP server) are placed by rounds, run by
``python -m agent --fleet`` subprocesses (emulated jobs, Celery consumers of ``node.<name>``) and
reported back over HTTP until they succeed; an agent killed mid-job stops heartbeating, so
:func:`scheduling.service.check_heartbeats` requeues its job with the progress it had reported, and a
new agent finishes it. Rounds are driven from the test (``run_round`` in a polling loop), not by
Celery beat, so the order of events is the test's. The invariants of TESTING.md hold at the end.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from cluster.tokens import write_token_file
from demo.submit import post_json
from scheduling.service import check_heartbeats, run_round
from tests.integration.conftest import Subprocesses, integration_redis_url, wait_for
from tests.service.invariants import assert_invariants

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

#: Generous deadlines (s) for conditions on a loaded 2-core CI machine; never asserted as timings.
DEADLINE_S = 90.0
#: The agents' heartbeat and progress period (s): several reports per second of a job.
REPORT_S = 0.5
#: Agent emulation speed: job seconds per wall second.
SPEEDUP = 10.0


class Agents(Subprocesses):
    """Starts ``python -m agent --fleet 1x4`` subprocesses against the live server and the test's
    Redis database, logs in ``log_dir``, and kills whatever is left (process group, SIGKILL)."""

    kind = "agent"

    def __init__(self, log_dir: Path, api: str, broker: str, prefix: str, token_file: Path) -> None:
        super().__init__(log_dir)
        self.api, self.broker = api, broker
        self.prefix, self.token_file = prefix, token_file

    def start(self) -> subprocess.Popen:
        return self.spawn(
            [
                sys.executable,
                "-m",
                "agent",
                "--fleet",
                "1x4",
                "--node",
                self.prefix,
                "--api",
                self.api,
                "--token-file",
                str(self.token_file),
                "--broker",
                self.broker,
                "--speedup",
                str(SPEEDUP),
                "--heartbeat-s",
                str(REPORT_S),
                "--progress-s",
                str(REPORT_S),
                "--tick-s",
                "0.1",
                "--log-level",
                "WARNING",
            ]
        )


@pytest.fixture
def node(redis_client: Any) -> tuple[Node, str]:
    """One registered node of four 49,140 MB GPUs named like ``--fleet 1x4`` names it, and its token."""
    return Node.register(f"ae{uuid.uuid4().hex[:6]}-00", 4, 49_140, "v100")


@pytest.fixture
def agents(node: tuple[Node, str], live_server: Any, redis_client: Any, tmp_path: Path) -> Iterator[Agents]:
    """Agent processes for ``node`` (fleet prefix = its name less ``-00``); killed at the end,
    before ``redis_client`` empties the test's Redis database. The cache is emptied at the end:
    a job that finishes asks for a round (``scheduling.service.request_round``), whose debounce key would
    otherwise swallow the next test's first round request for up to 2 s."""
    registered, token = node
    token_file = tmp_path / "tokens.json"
    write_token_file(token_file, {registered.name: token})
    started = Agents(
        tmp_path,
        live_server.url,
        integration_redis_url(settings.REDIS_URL),
        registered.name.removesuffix("-00"),
        token_file,
    )
    try:
        yield started
    finally:
        started.kill_all()
        cache.clear()


def submit(api: str, token: str, name: str, gpus: int, iterations: int, iteration_time_s: float) -> int:
    """POST a job to ``/api/v1/jobs/`` as a tenant; its id."""
    body = {
        "name": name,
        "model": "resnet50",
        "batch_size": 128,
        "iterations": iterations,
        "gpus": gpus,
        "iteration_time_s": iteration_time_s,
    }
    answer = post_json(f"{api}/api/v1/jobs/", body, {"Authorization": f"Token {token}"})
    return int(answer["id"])


def drive(condition: Any, what: str, agents: Agents) -> Any:
    """Run a heartbeat check and a round, then test ``condition``, until it holds (or fail)."""

    def step() -> Any:
        check_heartbeats()
        run_round()
        return condition()

    return wait_for(step, DEADLINE_S, f"{what}\n--- agent logs ---\n{agents.logs()}")


def all_succeeded(ids: list[int]) -> bool:
    return Job.objects.filter(pk__in=ids, status=Job.Status.SUCCEEDED).count() == len(ids)


def assert_finished(ids: list[int]) -> None:
    for job in Job.objects.filter(pk__in=ids):
        assert job.status == Job.Status.SUCCEEDED, job.status
        assert job.iterations_done == job.iterations, (job.pk, job.iterations_done, job.iterations)
    assert not Placement.objects.filter(active=True).exists(), "placements left active"
    assert_invariants()


def test_jobs_submitted_over_rest_run_to_completion(
    node: tuple[Node, str], agents: Agents, live_server: Any
) -> None:
    _, token = Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    # 1 + 2 + 1 GPUs fill the node's 4 at once; 20 iterations of 0.5 s = 10 s of job time,
    # 1 s of wall time at speedup 10.
    ids = [submit(live_server.url, token, f"job-{i}", gpus, 20, 0.5) for i, gpus in enumerate((1, 2, 1))]
    assert Job.objects.filter(pk__in=ids, status=Job.Status.PENDING).count() == 3
    agents.start()
    drive(lambda: all_succeeded(ids), f"jobs {ids} succeeded", agents)
    assert_finished(ids)
    assert not JobEvent.objects.filter(job_id__in=ids, kind=JobEvent.Kind.REQUEUED).exists()


def test_a_silent_agents_jobs_are_requeued_and_finish_on_a_new_agent(
    node: tuple[Node, str], agents: Agents, live_server: Any, settings: Any
) -> None:
    # Silent for 3 s = six missed heartbeats of 0.5 s: the node is declared unreachable.
    settings.SHAREWISE_HEARTBEAT_TIMEOUT_S = 3.0
    registered, _ = node
    _, token = Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    # 300 iterations of 0.5 s = 150 s of job time, 15 s of wall time at speedup 10: it is still
    # running when the first progress report (after ~0.5 s) has arrived and the agent is killed.
    job_id = submit(live_server.url, token, "long", 2, 300, 0.5)
    first = agents.start()
    running = Job.objects.filter(pk=job_id, status=Job.Status.RUNNING, iterations_done__gt=0)
    job = drive(running.first, f"job {job_id} running with progress reported", agents)
    agents.kill(first)

    # No new agent yet: the only node is silent, so no round can place the job again.
    drive(
        lambda: (
            Node.objects.filter(pk=registered.pk, status=Node.Status.UNHEALTHY).exists()
            and Job.objects.filter(pk=job_id, status=Job.Status.PENDING).exists()
        ),
        f"node {registered.name} unhealthy and job {job_id} pending",
        agents,
    )
    requeued = Job.objects.get(pk=job_id)
    # progress kept (at least what was reported before the kill), not finished
    assert job.iterations_done <= requeued.iterations_done < requeued.iterations
    assert not Placement.objects.filter(job_id=job_id, active=True).exists()
    assert JobEvent.objects.filter(job_id=job_id, kind=JobEvent.Kind.REQUEUED).exists()
    assert_invariants()

    agents.start()
    drive(lambda: all_succeeded([job_id]), f"job {job_id} succeeded on the new agent", agents)
    assert_finished([job_id])
    assert Node.objects.get(pk=registered.pk).status == Node.Status.READY
