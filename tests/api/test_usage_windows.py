"""GPU-hours over sliding windows in the tenant API and ``GET /api/v1/admin/usage/``
(docs/FAIRNESS.md §4), by hand: two tenants, one shared GPU, known intervals and slowdowns.

GPU node-00:0: team-a's job holds it from 3 h ago on; team-c's job shares it from 1 h ago on,
ξ_a = 1.0 beside it and ξ_c = 3.0, so while shared team-a pays ξ_c / (ξ_a + ξ_c) = 3/4 of each
GPU-second and team-c 1/4 (normalised progress, docs/FAIRNESS.md §3)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from cluster.models import Node, Placement, Tenant
from tests.frontend.conftest import gpu, make_job, place

TENANT_URL, ADMIN_USAGE_URL = "/api/v1/tenant/", "/api/v1/admin/usage/"


def share_one_gpu(tenant_a: Tenant, tenant_c: Tenant) -> None:
    """The module docstring's two jobs on node-00:0 (their tenants' placements written directly)."""
    now = timezone.now()
    a = make_job(tenant_a, "a-long", submitted_at=now - timedelta(hours=3))
    c = make_job(tenant_c, "c-late", submitted_at=now - timedelta(hours=1))
    place(a, gpu("node-00", 0), since=now - timedelta(hours=3))
    place(c, gpu("node-00", 0), slot=1, since=now - timedelta(hours=1))
    Placement.objects.filter(job=a).update(shared_with=c.pk, predicted_slowdown=1.0)
    Placement.objects.filter(job=c).update(shared_with=a.pk, predicted_slowdown=1.2, measured_slowdown=3.0)


@pytest.fixture
def shared_gpu(cluster: list[Node], tenant_a: Tenant, tenant_c: Tenant) -> None:
    share_one_gpu(tenant_a, tenant_c)


def windows(body: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {w["window_s"]: w for w in body}


def test_the_tenant_sees_its_windowed_gpu_hours_beside_its_quota(
    shared_gpu: None, alice_api: APIClient, charlie_api: APIClient
) -> None:
    a = windows(alice_api.get(TENANT_URL).json()["usage"]["gpu_hours"])
    # last 2 h: alone 1 h + 3/4 × 1 h shared = 1.75 GPU-h of 4 GPUs × 2 h = 8 → 0.21875
    assert a[7200]["gpu_hours"] == pytest.approx(1.75, abs=1e-3)
    assert (a[7200]["quota_gpu_hours"], a[7200]["share_of_quota"]) == (8.0, pytest.approx(0.21875, abs=1e-3))
    # last 24 h: alone 2 h + 0.75 = 2.75 GPU-h of 4 × 24 = 96
    assert a[86400]["gpu_hours"] == pytest.approx(2.75, abs=1e-3) and a[86400]["quota_gpu_hours"] == 96.0
    c = windows(charlie_api.get(TENANT_URL).json()["usage"]["gpu_hours"])
    # 1/4 × 1 h in both windows; team-c's 2 guaranteed GPUs × 2 h = 4 GPU-h → 0.0625
    assert c[7200]["gpu_hours"] == pytest.approx(0.25, abs=1e-3)
    assert c[7200]["share_of_quota"] == pytest.approx(0.0625, abs=1e-3)
    assert c[86400]["gpu_hours"] == pytest.approx(0.25, abs=1e-3)
    # the shares of the one GPU add up to the busy GPU-hours: 2 h in the last 2 h
    assert a[7200]["gpu_hours"] + c[7200]["gpu_hours"] == pytest.approx(2.0, abs=1e-3)


def test_windowed_fairness_is_over_the_tenants_that_demanded_gpus(
    shared_gpu: None, staff_api: APIClient, alice_api: APIClient
) -> None:
    body = staff_api.get(ADMIN_USAGE_URL, {"windows": "2h,24h"}).json()
    assert body["windows_s"] == [7200, 86400]
    assert [t["name"] for t in body["tenants"]] == ["team-a", "team-c"]
    fair = windows(body["fairness"])
    # last 2 h: both had work for at least half of it (team-a 2 h, team-c 1 h);
    # x_a = 1.75 / 4 = 0.4375, x_c = 0.25 / 2 = 0.125:
    # Jain = (0.5625)² / (2 × (0.4375² + 0.125²)) = 0.31640625 / 0.4140625 = 0.7642;
    # max/min = 0.4375 / 0.125 = 3.5
    assert fair[7200]["tenants"] == ["team-a", "team-c"]
    assert fair[7200]["jain_index"] == pytest.approx(0.7642, abs=2e-3)
    assert fair[7200]["max_min_ratio"] == pytest.approx(3.5, abs=0.02)
    # last 24 h: neither had work for 12 h: no figure
    assert fair[86400] == {"window_s": 86400, "jain_index": None, "max_min_ratio": None, "tenants": []}
    # a member sees the same figure, naming no tenant
    mine = windows(alice_api.get(TENANT_URL, {"windows": "2h"}).json()["usage"]["fairness"])
    assert set(mine) == {7200} and "tenants" not in mine[7200]
    assert mine[7200]["jain_index"] == fair[7200]["jain_index"]


def test_without_measured_slowdowns_a_shared_gpu_is_split_evenly(
    shared_gpu: None, alice_api: APIClient
) -> None:
    Placement.objects.update(measured_slowdown=None, predicted_slowdown=None)
    a = windows(alice_api.get(TENANT_URL, {"windows": "7200"}).json()["usage"]["gpu_hours"])
    assert a[7200]["gpu_hours"] == pytest.approx(1.5, abs=1e-3)  # 1 h alone + ½ × 1 h


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("abc", "each window is a whole number with an optional unit"),
        ("30s", "each window must be 60 s to 7 days"),
        ("8d", "each window must be 60 s to 7 days"),
        ("1h,2h,3h,4h,5h", "at most 4 windows, got 5"),
        ("2h,", "each window is a whole number"),
    ],
)
def test_bad_windows_are_400_with_a_message(
    raw: str, message: str, alice_api: APIClient, staff_api: APIClient
) -> None:
    for client, url in ((alice_api, TENANT_URL), (staff_api, ADMIN_USAGE_URL)):
        response = client.get(url, {"windows": raw})
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error.startswith("invalid input: windows") and message in error


def test_admin_usage_is_for_admins_only(alice_api: APIClient) -> None:
    assert alice_api.get(ADMIN_USAGE_URL).status_code == 403


def test_a_job_placed_twice_on_one_gpu_is_not_charged_for_the_gap(
    cluster: list[Node], tenant_a: Tenant, alice_api: APIClient
) -> None:
    """A job preempted (or requeued) and placed again on the same GPU holds it twice, not in
    between: its rows on node-00:0 from 90 to 60 min ago and from 30 min ago on cost
    0.5 + 0.5 = 1.0 GPU-h over the last 2 h — not the 1.5 GPU-h of one span from the first begin
    to the last end (the fault campaign's accounting check found that overcharge)."""
    now = timezone.now()
    job = make_job(tenant_a, "a-twice", submitted_at=now - timedelta(hours=2))
    first = place(job, gpu("node-00", 0), since=now - timedelta(minutes=90))
    Placement.objects.filter(pk=first.pk).update(active=False, ended_at=now - timedelta(minutes=60))
    place(job, gpu("node-00", 0), since=now - timedelta(minutes=30), generation=2)
    a = windows(alice_api.get(TENANT_URL).json()["usage"]["gpu_hours"])
    assert a[7200]["gpu_hours"] == pytest.approx(1.0, abs=1e-3)
