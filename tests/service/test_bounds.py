"""Bounded work (TESTING.md "Bad input": huge payloads): a heartbeat's list and what it costs, a
tenant's pending jobs, and how long job events are kept."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from cluster.models import Job, JobEvent, Tenant
from scheduling import service
from tests.api.conftest import JOBS_URL, job_body, token_client
from tests.service.test_agent_api import beat, place


def made_up(n: int, first: int = 10_000) -> list[dict[str, Any]]:
    return [{"job_id": first + i, "generation": 1, "iterations_done": 0} for i in range(n)]


def test_a_heartbeat_lists_at_most_two_jobs_per_gpu_of_a_node(
    fleet: dict, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    _, token = fleet["node-00"]
    answer = beat(token, "node-00", django_capture_on_commit_callbacks, running=made_up(129))
    assert answer.status_code == 400 and "running" in answer.json()["fields"]
    # the report's 1,400 made-up ids: over the body limit before any work
    assert (
        beat(token, "node-00", django_capture_on_commit_callbacks, running=made_up(1400)).status_code == 413
    )
    assert sent == []


def test_a_heartbeat_of_made_up_jobs_costs_a_bounded_number_of_queries(
    fleet: dict,
    sent: list,
    django_capture_on_commit_callbacks: Callable,
    django_assert_max_num_queries: Callable,
) -> None:
    _, token = fleet["node-00"]
    with django_assert_max_num_queries(25):  # auth, node, GPUs, placements, two for the stops
        answer = beat(token, "node-00", django_capture_on_commit_callbacks, running=made_up(128))
    assert answer.status_code == 200 and len(answer.json()["stopped"]) == 128
    assert {(m["action"], m["generation"]) for m in sent} == {("stop", 2)}


def test_a_tenant_has_at_most_the_configured_pending_jobs(alice: Any, charlie: Any, cluster: Any) -> None:
    alice_api, charlie_api = token_client(alice), token_client(charlie)
    with override_settings(SHAREWISE_MAX_PENDING_PER_TENANT=2):
        first = alice_api.post(JOBS_URL, job_body(name="a"), format="json", HTTP_IDEMPOTENCY_KEY="k1")
        assert first.status_code == 201
        assert alice_api.post(JOBS_URL, job_body(name="b"), format="json").status_code == 201
        full = alice_api.post(JOBS_URL, job_body(name="c"), format="json")
        assert full.status_code == 429 and full["Retry-After"] == "10"
        assert full.json() == {
            "error": "tenant team-a already has 2 pending jobs, the most it may have "
            "(SHAREWISE_MAX_PENDING_PER_TENANT); submit again when some have started, or cancel some",
            "retry_after": 10.0,
        }
        # a retry of an accepted submission is still answered with its job
        again = alice_api.post(JOBS_URL, job_body(name="a"), format="json", HTTP_IDEMPOTENCY_KEY="k1")
        assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
        # other tenants are not held back
        assert charlie_api.post(JOBS_URL, job_body(name="d"), format="json").status_code == 201
    assert Job.objects.filter(tenant__name="team-a").count() == 2


def ended(tenant: Tenant, name: str, days_ago: float, status: str = Job.Status.SUCCEEDED) -> Job:
    at = timezone.now() - timedelta(days=days_ago)
    job = Job.objects.create(
        tenant=tenant, name=name, model="resnet50", batch_size=64, iterations=10, gpus=1, status=status
    )
    Job.objects.filter(pk=job.pk).update(finished_at=at if status != Job.Status.RUNNING else None)
    for kind in (JobEvent.Kind.SUBMITTED, JobEvent.Kind.PROGRESS, JobEvent.Kind.PROGRESS):
        JobEvent.objects.create(job=job, kind=kind, at=at)
    return job


@override_settings(SHAREWISE_JOB_EVENT_RETENTION_DAYS=30)
def test_events_of_jobs_ended_before_the_retention_are_pruned(tenant: Tenant) -> None:
    old = ended(tenant, "old", 31)
    failed = ended(tenant, "failed", 45, Job.Status.FAILED)
    recent = ended(tenant, "recent", 29)
    running = ended(tenant, "running", 60, Job.Status.RUNNING)  # still running: its history stays
    assert service.prune_job_events(batch=2) == 6
    assert not JobEvent.objects.filter(job__in=[old, failed]).exists()
    assert (
        JobEvent.objects.filter(job=recent).count() == 3 and JobEvent.objects.filter(job=running).count() == 3
    )
    assert Job.objects.filter(pk__in=[old.pk, failed.pk]).count() == 2  # the jobs stay
    with override_settings(SHAREWISE_JOB_EVENT_RETENTION_DAYS=0):
        ended(tenant, "older", 400)
        assert service.prune_job_events() == 0


def test_the_pruning_runs_hourly_on_the_beat_schedule() -> None:
    entry = settings.CELERY_BEAT_SCHEDULE["prune-job-events"]
    assert entry["task"] == "sharewise.prune_job_events" and entry["schedule"] == 3600.0
    from scheduling import tasks

    assert tasks.prune_job_events.name == "sharewise.prune_job_events"


def test_a_placed_job_is_unaffected_by_pruning(
    tenant: Tenant, fleet: dict, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = place(tenant, django_capture_on_commit_callbacks)
    with override_settings(SHAREWISE_JOB_EVENT_RETENTION_DAYS=1e-9):
        assert service.prune_job_events() == 0
    assert JobEvent.objects.filter(job=job, kind=JobEvent.Kind.PLACED).exists()
