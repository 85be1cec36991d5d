"""A web process that cannot reach its cache or broker (TESTING.md "Faults": make the broker or
cache unreachable for one process): ``/readyz`` says so (503), the tenant API answers 503 with a
clear error instead of 500, and the agents' heartbeats still record the node as alive, so no
healthy node is marked unhealthy and no job is requeued because this process lost Redis.

The unreachable services are a Redis URL on port 1 of the loopback (nothing listens: refused at
once); no Redis server is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from cluster.models import Job, Node, Tenant
from scheduling import service
from scheduling.service.health import cache_is_shared
from tests.api.conftest import JOBS_URL, job_body, token_client
from tests.service.test_agent_api import beat, place, report

DEAD_REDIS = "redis://127.0.0.1:1/0"
DEAD_CACHE = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": DEAD_REDIS}}


@pytest.fixture
def dead_broker(settings: Any) -> Iterator[None]:
    """A broker configured (not eager) that nothing answers, for this process's Celery app too."""
    from config.celery import app

    previous = app.conf.broker_url  # before the settings change: the app reads them lazily
    settings.CELERY_BROKER_URL = DEAD_REDIS
    settings.CELERY_TASK_ALWAYS_EAGER = False
    app.conf.broker_url = DEAD_REDIS
    app._after_fork()  # forget pooled connections to the previous URL
    try:
        yield
    finally:
        app.conf.broker_url = previous
        app._after_fork()


def test_readyz_covers_the_cache_and_the_broker(client: Any, db: None, dead_broker: None) -> None:
    with override_settings(CACHES=DEAD_CACHE):
        answer = client.get("/readyz")
    assert answer.status_code == 503
    assert answer.json()["status"] == "unavailable" and answer.json()["error"].startswith("cache unreachable")
    # the cache back, the broker still out
    answer = client.get("/readyz")
    assert answer.status_code == 503 and answer.json()["error"].startswith("broker unreachable")


def test_readyz_names_what_it_checked(client: Any, db: None) -> None:
    answer = client.get("/readyz")
    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "status": "ok",
        "database": connection.vendor,
        "cache": "ok" if cache_is_shared() else "not configured",
        "broker": "ok" if service.broker_configured() else "not configured",  # .ci/run: Redis
    }


@override_settings(CACHES=DEAD_CACHE)
def test_a_submission_without_the_cache_is_503_with_a_clear_error(alice: Any, cluster: list[Node]) -> None:
    answer = token_client(alice).post(JOBS_URL, job_body(), format="json")
    assert answer.status_code == 503
    assert answer.json() == {
        "error": "service unavailable: the shared cache (CACHE_URL) is unreachable from this server; "
        "retry later",
        "retry_after": 5,
    }
    assert answer["Retry-After"] == "5"
    assert not Job.objects.exists()


@pytest.fixture
def fleet_and_job(
    cluster: list[Node], tenant_a: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> tuple[str, Job]:
    """node-00's agent token and a job placed on node-00 (generation 1)."""
    node = cluster[0]
    token = node.issue_agent_token()
    node.save()
    return token, place(tenant_a, django_capture_on_commit_callbacks)


def test_heartbeats_without_the_cache_keep_the_node_alive_and_requeue_nothing(
    fleet_and_job: tuple[str, Job], django_capture_on_commit_callbacks: Callable, dead_broker: None
) -> None:
    token, job = fleet_and_job
    capture = django_capture_on_commit_callbacks
    running = [{"job_id": job.pk, "generation": 1, "iterations_done": 40}]
    with override_settings(CACHES=DEAD_CACHE, SHAREWISE_HEARTBEAT_INTERVAL_S=0.0):
        # the job reported, then missing from every later heartbeat: with the cache out no miss is
        # confirmed, so nothing is requeued
        assert beat(token, "node-00", capture, running=running).status_code == 200
        for _ in range(3):
            answer = beat(token, "node-00", capture, running=[])
            assert answer.status_code == 200 and answer.json() == {"stopped": [], "requeued": []}
    node = Node.objects.get(name="node-00")
    assert node.status == Node.Status.READY
    assert timezone.now() - node.last_heartbeat < timedelta(seconds=30)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING and job.iterations_done == 40
    # the heartbeat check (a worker that reaches everything) finds the node alive
    assert service.check_heartbeats() == {}


def test_an_agent_event_without_the_cache_is_recorded(
    fleet_and_job: tuple[str, Job], django_capture_on_commit_callbacks: Callable, dead_broker: None
) -> None:
    token, job = fleet_and_job
    with override_settings(CACHES=DEAD_CACHE):
        # finishing asks for a round (debounced in the cache): skipped, the event still counts
        answer = report(
            token, job, django_capture_on_commit_callbacks, event="finished", iterations_done=1000
        )
    assert answer.status_code == 200 and answer.json()["accepted"] is True
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
