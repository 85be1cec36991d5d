"""The admin API (/api/v1/admin/...): staff manage tenants, quotas, nodes and GPUs."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

from cluster.api_tokens import ApiToken
from cluster.models import GPU, Job, Membership, Node, Placement, Quota, Tenant, hash_token


def test_staff_creates_tenant_and_quota(staff_api: APIClient) -> None:
    tenant = staff_api.post("/api/v1/admin/tenants/", {"name": "team-b"}, format="json")
    assert tenant.status_code == 201
    quota = staff_api.post(
        "/api/v1/admin/quotas/",
        {"tenant": tenant.json()["id"], "guaranteed_gpus": 4, "borrow_limit": 0},
        format="json",
    )
    assert quota.status_code == 201
    assert Quota.objects.get().guaranteed_gpus == 4
    detail = staff_api.get(f"/api/v1/admin/tenants/{tenant.json()['id']}/").json()
    assert detail["quotas"] == [{"guaranteed_gpus": 4, "borrow_limit": 0, "gpu_type": ""}]


def test_bad_tenant_and_quota_input(staff_api: APIClient, tenant_a: Tenant) -> None:
    dup = staff_api.post("/api/v1/admin/tenants/", {"name": "team-a"}, format="json")
    assert dup.status_code == 400 and dup.json()["fields"]["name"] == [
        "a tenant named 'team-a' already exists"
    ]
    negative = staff_api.post(
        "/api/v1/admin/quotas/", {"tenant": tenant_a.pk, "guaranteed_gpus": -1}, format="json"
    )
    assert negative.status_code == 400 and "guaranteed_gpus" in negative.json()["fields"]
    # team-a already has an any-type quota from its fixture.
    twice = staff_api.post(
        "/api/v1/admin/quotas/", {"tenant": tenant_a.pk, "guaranteed_gpus": 1}, format="json"
    )
    assert twice.status_code == 400
    assert twice.json()["error"] == "invalid input: tenant team-a already has a quota for GPU type 'any'"
    assert Quota.objects.filter(tenant=tenant_a).count() == 1


def test_staff_registers_node_and_sees_its_token_once(staff_api: APIClient) -> None:
    response = staff_api.post(
        "/api/v1/admin/nodes/",
        {"name": "node-09", "gpus": 2, "gpu_memory_mb": 32_000, "gpu_type": "v100"},
        format="json",
    )
    assert response.status_code == 201
    data = response.json()
    node = Node.objects.get(name="node-09")
    assert node.agent_token_hash == hash_token(data["agent_token"]) != data["agent_token"]
    assert [(g["index"], g["memory_mb"]) for g in data["gpus"]] == [(0, 32_000), (1, 32_000)]
    assert "agent_token" not in staff_api.get(f"/api/v1/admin/nodes/{node.pk}/").json()
    dup = staff_api.post(
        "/api/v1/admin/nodes/",
        {"name": "node-09", "gpus": 2, "gpu_memory_mb": 32_000, "gpu_type": "v100"},
        format="json",
    )
    assert dup.status_code == 400 and GPU.objects.filter(node__name="node-09").count() == 2


def test_staff_drains_node_and_marks_gpu_unhealthy(staff_api: APIClient) -> None:
    node = Node.objects.get(name="node-00")
    response = staff_api.patch(f"/api/v1/admin/nodes/{node.pk}/", {"status": "draining"}, format="json")
    assert response.status_code == 200 and response.json()["status"] == "draining"
    gpu = node.gpus.get(index=3)
    response = staff_api.patch(f"/api/v1/admin/gpus/{gpu.pk}/", {"healthy": False}, format="json")
    assert response.status_code == 200
    assert GPU.objects.schedulable().count() == 7
    # Only `healthy` is writable on a GPU.
    assert (
        staff_api.patch(f"/api/v1/admin/gpus/{gpu.pk}/", {"memory_mb": 1}, format="json").status_code == 400
    )


def test_deleting_a_node_with_placements_is_409(staff_api: APIClient, tenant_a: Tenant) -> None:
    node = Node.objects.get(name="node-00")
    job = Job.objects.create(
        tenant=tenant_a, name="j", model="resnet50", batch_size=64, iterations=10, gpus=1
    )
    Placement.objects.create(job=job, gpu=node.gpus.get(index=0), generation=1, sub_batch=64)
    response = staff_api.delete(f"/api/v1/admin/nodes/{node.pk}/")
    assert response.status_code == 409
    error = response.json()["error"]
    assert error == (
        f"node node-00 still runs jobs ({job.pk}); drain it (status draining) "
        "and wait until they stop before deleting it"
    ), error
    assert Node.objects.filter(pk=node.pk).exists() and GPU.objects.filter(node=node).count() == 4


def _job(tenant: Tenant, status: str, name: str = "j") -> Job:
    return Job.objects.create(
        tenant=tenant, name=name, model="resnet50", batch_size=64, iterations=10, gpus=1, status=status
    )


@pytest.mark.parametrize("active", [Job.Status.PENDING, Job.Status.RUNNING])
def test_deleting_a_tenant_with_live_jobs_is_409(
    staff_api: APIClient, tenant_a: Tenant, alice: Any, active: str
) -> None:
    done = _job(tenant_a, Job.Status.SUCCEEDED, "done")
    live = _job(tenant_a, active, "live")
    response = staff_api.delete(f"/api/v1/admin/tenants/{tenant_a.pk}/")
    assert response.status_code == 409
    assert response.json() == {
        "error": f"tenant team-a still has pending or running jobs ({live.pk}); "
        "cancel them and wait until they stop before deleting the tenant"
    }
    # Nothing deleted: the tenant, both jobs, its member and her token.
    assert Tenant.objects.filter(pk=tenant_a.pk).exists()
    assert set(Job.objects.values_list("pk", flat=True)) == {done.pk, live.pk}
    assert get_user_model().objects.filter(username="alice").exists() and ApiToken.objects.filter(user=alice)


def test_deleting_a_finished_tenant_removes_its_members_so_the_name_is_free(
    staff_api: APIClient, tenant_a: Tenant, alice: Any, tenant_c: Tenant
) -> None:
    for status in (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED):
        _job(tenant_a, status, status)
    assert ApiToken.objects.filter(user=alice).exists()
    response = staff_api.delete(f"/api/v1/admin/tenants/{tenant_a.pk}/")
    assert response.status_code == 204
    assert not Tenant.objects.filter(name="team-a").exists() and not Job.objects.exists()
    assert not get_user_model().objects.filter(username="alice").exists()
    assert not ApiToken.objects.filter(user__username="alice").exists()
    # Only team-a went: team-c and the staff account stay.
    assert get_user_model().objects.filter(username__in=["charlie", "root-admin"]).count() == 2
    # The same command as at first works again (create_with_owner: NAME, quota, username alice).
    Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    call_command("create_tenant", "team-b", "--quota-gpus", "1", stdout=StringIO(), stderr=StringIO())


def test_deleting_a_tenant_keeps_staff_accounts(staff_api: APIClient, tenant_a: Tenant) -> None:
    staff = get_user_model().objects.create_user("ops", is_staff=True)
    Membership.objects.create(user=staff, tenant=tenant_a, role=Membership.Role.MEMBER)
    assert staff_api.delete(f"/api/v1/admin/tenants/{tenant_a.pk}/").status_code == 204
    assert get_user_model().objects.filter(username="ops").exists()
    assert not Membership.objects.exists()
