"""Tenant isolation: Charlie (tenant C) can neither see nor change A's jobs; Bob (A) can."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from cluster.models import Job
from tests.api.conftest import JOBS_URL, job_body, token_client


def test_charlie_does_not_see_alices_jobs_in_lists(charlie_api: APIClient, alice_job: dict[str, Any]) -> None:
    charlie_api.post(JOBS_URL, job_body(name="charlie-job"), format="json")
    names = [job["name"] for job in charlie_api.get(JOBS_URL).json()["results"]]
    assert names == ["charlie-job"]
    assert charlie_api.get(JOBS_URL, {"status": "pending"}).json()["count"] == 1


def test_charlie_gets_404_for_alices_job(charlie_api: APIClient, alice_job: dict[str, Any]) -> None:
    response = charlie_api.get(f"{JOBS_URL}{alice_job['id']}/")
    assert response.status_code == 404
    assert "error" in response.json()


def test_charlie_cannot_cancel_alices_job(charlie_api: APIClient, alice_job: dict[str, Any]) -> None:
    assert charlie_api.post(f"{JOBS_URL}{alice_job['id']}/cancel/").status_code == 404
    assert Job.objects.get(pk=alice_job["id"]).status == "pending"


def test_bob_sees_and_cancels_his_teammates_job(bob_api: APIClient, alice_job: dict[str, Any]) -> None:
    assert [job["id"] for job in bob_api.get(JOBS_URL).json()["results"]] == [alice_job["id"]]
    assert bob_api.post(f"{JOBS_URL}{alice_job['id']}/cancel/").status_code == 200


def test_tenant_comes_from_the_caller_never_the_payload(
    charlie_api: APIClient, tenant_a: Any, tenant_c: Any
) -> None:
    response = charlie_api.post(JOBS_URL, job_body(tenant=tenant_a.pk), format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"tenant": ["unknown or read-only field"]}
    assert not Job.objects.exists()
    charlie_api.post(JOBS_URL, job_body(), format="json")
    assert list(Job.objects.values_list("tenant__name", flat=True)) == ["team-c"]


def test_tenant_view_is_the_callers(charlie_api: APIClient, alice_api: APIClient) -> None:
    assert charlie_api.get("/api/v1/tenant/").json()["name"] == "team-c"
    assert alice_api.get("/api/v1/tenant/").json()["name"] == "team-a"


def test_anonymous_is_401_and_user_without_tenant_is_403(db: None, cluster: Any) -> None:
    response = APIClient().get(JOBS_URL)
    assert response.status_code == 401 and "error" in response.json()
    assert APIClient(HTTP_AUTHORIZATION="Token not-a-token").get(JOBS_URL).status_code == 401
    loner = token_client(get_user_model().objects.create_user("dave"))
    response = loner.post(JOBS_URL, job_body(), format="json")
    assert response.status_code == 403
    assert response.json() == {"error": "this account is not a member of any tenant"}
    assert not Job.objects.exists()


def test_tenant_member_cannot_use_admin_api(alice_api: APIClient) -> None:
    for url in (
        "/api/v1/admin/tenants/",
        "/api/v1/admin/nodes/",
        "/api/v1/admin/gpus/",
        "/api/v1/admin/quotas/",
    ):
        assert alice_api.get(url).status_code == 403
