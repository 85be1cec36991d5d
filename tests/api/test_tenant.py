"""GET /api/v1/tenant/: the caller's tenant, its quotas and usage."""

from __future__ import annotations

from rest_framework.test import APIClient

from cluster.models import Job, Quota
from tests.api.conftest import JOBS_URL, job_body


def test_tenant_shows_quota_and_usage(alice_api: APIClient, tenant_a: object) -> None:
    Quota.objects.create(tenant=tenant_a, guaranteed_gpus=2, gpu_type="a100")
    ids = [alice_api.post(JOBS_URL, job_body(gpus=g), format="json").json()["id"] for g in (2, 3, 1)]
    Job.objects.filter(pk__in=ids[:2]).update(status=Job.Status.RUNNING)
    Job.objects.filter(pk=ids[2]).update(status=Job.Status.FAILED)
    data = alice_api.get("/api/v1/tenant/").json()
    assert data["name"] == "team-a"
    assert sorted(data["quotas"], key=lambda q: q["gpu_type"]) == [
        {"guaranteed_gpus": 4, "borrow_limit": 2, "gpu_type": ""},
        {"guaranteed_gpus": 2, "borrow_limit": None, "gpu_type": "a100"},
    ]
    # Running gangs of 2 and 3 GPUs hold 2 + 3 = 5 GPUs; quotas guarantee 4 + 2 = 6.
    assert data["usage"]["gpus_in_use"] == 5
    assert data["usage"]["guaranteed_gpus"] == 6
    assert data["usage"]["jobs"] == {"pending": 0, "running": 2, "succeeded": 0, "failed": 1, "cancelled": 0}


def test_tenant_is_read_only(alice_api: APIClient) -> None:
    assert alice_api.patch("/api/v1/tenant/", {"name": "other"}, format="json").status_code == 405
    assert alice_api.get("/api/v1/tenant/").json()["name"] == "team-a"
