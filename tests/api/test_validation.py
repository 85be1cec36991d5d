"""Bad input at the API: typed and bounded fields, malformed bodies, nothing half-written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from cluster import job_insert
from cluster.models import GPU, Job, JobEvent, Node, Tenant
from tests.api.conftest import JOBS_URL, job_body

BAD_FIELDS: list[tuple[dict[str, Any], str]] = [
    ({"gpus": 0}, "gpus"),
    ({"gpus": -1}, "gpus"),
    ({"gpus": 9}, "gpus"),  # the fixture cluster has 2 x 4 = 8 healthy GPUs
    ({"gpus": "2"}, "gpus"),
    ({"gpus": 2.0}, "gpus"),
    ({"gpus": True}, "gpus"),
    ({"gpus": None}, "gpus"),
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": 2**20 + 1}, "batch_size"),
    ({"batch_size": 10**30}, "batch_size"),
    ({"iterations": 0}, "iterations"),
    ({"iterations": 100_000_001}, "iterations"),
    ({"iterations": [1]}, "iterations"),
    ({"name": ""}, "name"),
    ({"name": "Has Spaces"}, "name"),
    ({"name": "-leading-hyphen"}, "name"),
    ({"name": "x" * 65}, "name"),
    ({"name": 42}, "name"),
    ({"name": "nul\u0000byte"}, "name"),
    ({"model": ""}, "model"),
    ({"model": "resnet 50"}, "model"),
    ({"model": {"a": 1}}, "model"),
    ({"gpu_memory_mb": 0}, "gpu_memory_mb"),
    ({"gpu_memory_mb": 2**20 + 1}, "gpu_memory_mb"),
    ({"iteration_time_s": 0}, "iteration_time_s"),
    ({"iteration_time_s": -0.5}, "iteration_time_s"),
    ({"iteration_time_s": 86_401}, "iteration_time_s"),
    ({"iteration_time_s": "nan"}, "iteration_time_s"),
    ({"iteration_time_s": 10**400}, "iteration_time_s"),  # a JSON integer beyond the float range
    ({"command": "x" * 4097}, "command"),
    ({"command": "echo \u0000"}, "command"),
    ({"command": "\ud800"}, "command"),
    ({"command": 'echo "unclosed'}, "command"),  # the agent could not split it (shlex)
    ({"command": "echo trailing\\"}, "command"),
    ({"priority": 101}, "priority"),
    ({"priority": -101}, "priority"),
    ({"status": "running"}, "status"),
    ({"id": 5}, "id"),
    ({"colour": "blue"}, "colour"),
]


@pytest.mark.parametrize(("override", "field"), BAD_FIELDS)
def test_bad_field_is_400_naming_the_field(
    alice_api: APIClient, override: dict[str, Any], field: str
) -> None:
    # json.dumps escapes a lone surrogate as \\ud800, as a client would send it.
    raw = json.dumps(job_body(**override))
    response = alice_api.generic("POST", JOBS_URL, raw, content_type="application/json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body["fields"]) == {field}
    assert body["error"].startswith(f"invalid input: {field}: ")
    assert not Job.objects.exists() and not JobEvent.objects.exists()


@pytest.mark.parametrize("field", ["name", "model", "batch_size", "iterations", "gpus"])
def test_required_fields(alice_api: APIClient, field: str) -> None:
    body = job_body()
    del body[field]
    response = alice_api.post(JOBS_URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {field: ["This field is required."]}


def test_bounds_are_inclusive(alice_api: APIClient) -> None:
    GPU.objects.update(memory_mb=2**20)  # so that 2^20 MB per GPU at the full batch can run
    body = job_body(
        gpus=8,
        batch_size=2**20,
        iterations=100_000_000,
        priority=-100,
        command="x" * 4096,
        iteration_time_s=86_400,
        gpu_memory_mb=2**20,
        name="a" * 64,
    )
    assert alice_api.post(JOBS_URL, body, format="json").status_code == 201


def test_gang_bound_follows_healthy_gpus(alice_api: APIClient) -> None:
    # 8 GPUs registered; one unhealthy GPU and one unhealthy node (4 GPUs) leave 8 - 1 - 4 = 3.
    GPU.objects.filter(node__name="node-00", index=0).update(healthy=False)
    Node.objects.filter(name="node-01").update(status=Node.Status.UNHEALTHY)
    response = alice_api.post(JOBS_URL, job_body(gpus=4), format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["gpus"] == ["at most 3 GPUs (the healthy GPUs of the cluster), got 4"]
    assert alice_api.post(JOBS_URL, job_body(gpus=3), format="json").status_code == 201


def test_no_gpus_registered_is_a_clear_400(alice_api: APIClient) -> None:
    Node.objects.all().delete()
    response = alice_api.post(JOBS_URL, job_body(gpus=1), format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["gpus"] == [
        "no healthy GPUs are registered yet; an admin must add nodes first"
    ]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b'{"name": "x", ', "malformed JSON"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b'{"gpus": NaN}', "malformed JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "request body larger than"),
        (b"[" * 30_000 + b"]" * 30_000, "malformed JSON"),
    ],
    ids=["truncated", "not-utf8", "nan", "huge-nested", "deep-nested"],
)
def test_malformed_json_is_4xx(alice_api: APIClient, payload: bytes, message: str) -> None:
    response = alice_api.generic("POST", JOBS_URL, payload, content_type="application/json")
    assert response.status_code in (400, 413)
    assert message in response.json()["error"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("payload", [b"[]", b'"job"', b"42", b"null"])
def test_json_that_is_not_an_object_is_400(alice_api: APIClient, payload: bytes) -> None:
    response = alice_api.generic("POST", JOBS_URL, payload, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"].startswith("invalid input")


def test_wrong_content_type_is_415(alice_api: APIClient) -> None:
    response = alice_api.post(JOBS_URL, job_body(), format="multipart")
    assert response.status_code == 415
    assert response.json()["error"].startswith('Unsupported media type "multipart/form-data')
    response = alice_api.generic("POST", JOBS_URL, "name=x", content_type="text/plain")
    assert response.status_code == 415
    assert not Job.objects.exists()


def test_huge_body_is_413(alice_api: APIClient) -> None:
    body = job_body(command="x" * 70_000)  # > DATA_UPLOAD_MAX_MEMORY_SIZE = 64 KiB
    response = alice_api.post(JOBS_URL, body, format="json")
    assert response.status_code == 413
    assert response.json() == {"error": "request body larger than 65536 bytes"}
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=50):  # the body is ~90 bytes
        assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 413
    assert not Job.objects.exists()


@pytest.mark.parametrize("job_id", ["abc", "-1", "99999999999999999999999", "1.5", "999999999999999999"])
def test_odd_ids_are_json_404(alice_api: APIClient, staff_api: APIClient, job_id: str) -> None:
    """Ids that are not numbers, or too long for the id pattern, answer like a missing job: the
    API's JSON 404, never Django's HTML page."""
    for response in (
        alice_api.get(f"{JOBS_URL}{job_id}/"),
        alice_api.post(f"{JOBS_URL}{job_id}/cancel/"),
        staff_api.get(f"/api/v1/admin/tenants/{job_id}/"),
        staff_api.delete(f"/api/v1/admin/tenants/{job_id}/"),
        staff_api.patch(f"/api/v1/admin/nodes/{job_id}/", {"status": "draining"}, format="json"),
    ):
        assert response.status_code == 404, response.content
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"error": "not found"}
    assert Tenant.objects.count() == 1 and not Node.objects.filter(status="draining").exists()


def test_unknown_api_path_is_json_404(alice_api: APIClient) -> None:
    response = alice_api.post("/api/v1/no-such-thing/", {}, format="json")
    assert response.status_code == 404 and response.json() == {"error": "not found"}


def test_failed_event_write_leaves_no_job(alice_api: APIClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The job and its ``submitted`` event are one transaction: if the event fails, no job remains.
    On PostgreSQL both are one statement (cluster/job_insert.py): the event's half is made to fail
    in the database (a time that is no time), so the job's half must be undone with it."""
    if job_insert.supported():
        prepared = job_insert.prepared

        def broken_event(instance: Any, plan: tuple[Any, ...]) -> list[Any]:
            values = prepared(instance, plan)
            if isinstance(instance, JobEvent):
                values[[f.attname for f, *_ in plan].index("at")] = "not a time"
            return values

        monkeypatch.setattr(job_insert, "prepared", broken_event)
    else:

        def broken(*args: Any, **kwargs: Any) -> None:
            raise RuntimeError("event store down")

        monkeypatch.setattr(JobEvent.objects, "create", broken)
    client = alice_api
    client.raise_request_exception = False
    response = client.post(JOBS_URL, job_body(), format="json")
    assert response.status_code == 500
    assert not Job.objects.exists()


def test_job_needing_more_memory_than_any_gpu_is_400(alice_api: APIClient) -> None:
    """The cluster's GPUs have 16,000 MB. Batch 1 has a single sub-batch (1), so its memory per GPU
    is the given gpu_memory_mb itself: 16,000 fits, 16,001 can never run, nothing is written."""
    response = alice_api.post(JOBS_URL, job_body(gpus=1, batch_size=1, gpu_memory_mb=16_001), format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["gpu_memory_mb"] == [
        "the job can never run: 16001 MB per GPU at the full batch needs 16001 MB per GPU even at "
        "sub-batch 1, more than the largest healthy GPU (16000 MB)"
    ]
    assert not Job.objects.exists()
    response = alice_api.post(JOBS_URL, job_body(gpus=1, gpu_memory_mb=1_000_000), format="json")
    assert response.status_code == 400 and "largest healthy GPU (16000 MB)" in response.json()["error"]
    assert not Job.objects.exists()
    assert (
        alice_api.post(
            JOBS_URL, job_body(gpus=1, batch_size=1, gpu_memory_mb=16_000), format="json"
        ).status_code
        == 201
    )


def test_memory_bound_follows_healthy_gpus_and_gradient_accumulation(alice_api: APIClient) -> None:
    # A bigger GPU counts only while healthy. (Saved, as the heartbeats do: the bounds cached for
    # submissions are forgotten on a GPU's save, cluster/cluster_facts.py.)
    gpu = GPU.objects.get(node__name="node-01", index=0)
    gpu.memory_mb, gpu.healthy = 40_000, False
    gpu.save()
    body = job_body(gpus=1, batch_size=1, gpu_memory_mb=40_000)
    assert alice_api.post(JOBS_URL, body, format="json").status_code == 400
    gpu.healthy = True
    gpu.save()
    assert alice_api.post(JOBS_URL, body, format="json").status_code == 201
    # 60,000 MB at the full batch 128 still runs on 40,000 MB (MODEL.md §1, gradient accumulation):
    # mem(64) = static + (60,000 - static) / 2 ≤ 40,000 whenever static ≤ 20,000 MB, a third.
    assert alice_api.post(JOBS_URL, job_body(gpus=1, gpu_memory_mb=60_000), format="json").status_code == 201
