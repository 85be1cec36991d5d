"""Submitting, listing, reading and cancelling jobs through /api/v1/jobs/."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from cluster.models import GPU, Job, JobEvent, Placement
from tests.api.conftest import JOBS_URL, job_body


def test_submit_creates_pending_job_of_callers_tenant(alice_api: APIClient, alice: Any) -> None:
    body = job_body(gpu_memory_mb=9_000, iteration_time_s=0.25, command="python train.py", priority=3)
    response = alice_api.post(JOBS_URL, body, format="json")
    assert response.status_code == 201
    data = response.json()
    assert response["Location"] == f"{JOBS_URL}{data['id']}/"
    for key, value in body.items():
        assert data[key] == value
    assert data["status"] == "pending"
    assert data["iterations_done"] == 0
    assert data["placement"] == []
    assert data["started_at"] is None and data["finished_at"] is None
    job = Job.objects.get(pk=data["id"])
    assert job.tenant.name == "team-a" and job.submitter == alice
    assert list(job.events.values_list("kind", flat=True)) == ["submitted"]


def test_optional_fields_take_defaults(alice_api: APIClient) -> None:
    data = alice_api.post(JOBS_URL, job_body(), format="json").json()
    assert data["priority"] == 0
    assert data["command"] == ""
    assert data["gpu_memory_mb"] is None and data["iteration_time_s"] is None


def test_list_is_newest_first_and_filters_by_status(alice_api: APIClient) -> None:
    ids = [alice_api.post(JOBS_URL, job_body(name=f"j{i}"), format="json").json()["id"] for i in range(3)]
    Job.objects.filter(pk=ids[0]).update(status=Job.Status.RUNNING)
    listing = alice_api.get(JOBS_URL).json()
    assert listing["count"] == 3
    assert [job["id"] for job in listing["results"]] == ids[::-1]
    running = alice_api.get(JOBS_URL, {"status": "running"}).json()
    assert [job["id"] for job in running["results"]] == [ids[0]]
    bad = alice_api.get(JOBS_URL, {"status": "sleeping"})
    assert bad.status_code == 400 and "status" in bad.json()["fields"]


def test_list_pagination_limit(alice_api: APIClient) -> None:
    for i in range(3):
        alice_api.post(JOBS_URL, job_body(name=f"j{i}"), format="json")
    page = alice_api.get(JOBS_URL, {"limit": 2}).json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]


def test_get_shows_current_placement(alice_api: APIClient, alice_job: dict[str, Any]) -> None:
    job = Job.objects.get(pk=alice_job["id"])
    gpus = list(GPU.objects.filter(node__name="node-01").order_by("index")[:2])
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING)
    for gpu in gpus:
        Placement.objects.create(job=job, gpu=gpu, generation=7, sub_batch=32)
    # An ended placement of an older generation is history, not the current placement.
    Placement.objects.create(
        job=job, gpu=GPU.objects.get(node__name="node-00", index=0), generation=6, sub_batch=64, active=False
    )
    data = alice_api.get(f"{JOBS_URL}{job.pk}/").json()
    assert data["status"] == "running"
    assert [(p["node"], p["gpu_index"], p["sub_batch"], p["generation"]) for p in data["placement"]] == [
        ("node-01", 0, 32, 7),
        ("node-01", 1, 32, 7),
    ]
    assert data["placement"][0]["gpu_uuid"] == gpus[0].uuid


def test_cancel_pending_job(alice_api: APIClient, alice_job: dict[str, Any]) -> None:
    url = f"{JOBS_URL}{alice_job['id']}/cancel/"
    response = alice_api.post(url)
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled" and response.json()["finished_at"]
    # Repeating the cancel is harmless and appends no second event.
    assert alice_api.post(url).status_code == 200
    kinds = list(JobEvent.objects.filter(job_id=alice_job["id"]).values_list("kind", flat=True))
    assert kinds == ["submitted", "cancelled"]


def test_cancel_refuses_unknown_fields_and_cancels_nothing(
    alice_api: APIClient, alice_job: dict[str, Any]
) -> None:
    response = alice_api.post(f"{JOBS_URL}{alice_job['id']}/cancel/", {"force": True}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"force": ["unknown or read-only field"]}
    assert Job.objects.get(pk=alice_job["id"]).status == Job.Status.PENDING


def test_cancel_running_job_releases_its_gpus(alice_api: APIClient, alice_job: dict[str, Any]) -> None:
    job = Job.objects.get(pk=alice_job["id"])
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING)
    for gpu in GPU.objects.filter(node__name="node-00")[:2]:
        Placement.objects.create(job=job, gpu=gpu, generation=1, sub_batch=128)
    response = alice_api.post(f"{JOBS_URL}{job.pk}/cancel/")
    assert response.status_code == 200 and response.json()["placement"] == []
    assert not Placement.objects.filter(job=job, active=True).exists()


def test_cancel_finished_job_is_conflict(alice_api: APIClient, alice_job: dict[str, Any]) -> None:
    Job.objects.filter(pk=alice_job["id"]).update(status=Job.Status.SUCCEEDED)
    response = alice_api.post(f"{JOBS_URL}{alice_job['id']}/cancel/")
    assert response.status_code == 409
    assert response.json() == {"error": f"job {alice_job['id']} already succeeded"}
    assert Job.objects.get(pk=alice_job["id"]).status == "succeeded"


def test_jobs_cannot_be_edited_or_deleted(alice_api: APIClient, alice_job: dict[str, Any]) -> None:
    url = f"{JOBS_URL}{alice_job['id']}/"
    assert alice_api.patch(url, {"gpus": 1}, format="json").status_code == 405
    assert alice_api.delete(url).status_code == 405
    assert Job.objects.get(pk=alice_job["id"]).gpus == 2
