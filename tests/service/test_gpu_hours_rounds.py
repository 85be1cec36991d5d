"""Windowed GPU-hours after live rounds (docs/FAIRNESS.md §4): rounds place the jobs, the tenant
API and the admin API charge them. Two tenants, one shared GPU: team-a's job starts alone on a
GPU 2 h ago, team-c's identical job (same model, batch and sub-batch, so the same ξ beside each
other) joins it 1 h ago: each pays ½ of the shared hour (docs/FAIRNESS.md §3)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from cluster.models import Node, Placement, Tenant
from scheduling import service
from scheduling.core import types as core
from tests.conftest import skip_or_fail
from tests.service.test_rounds import FixedPolicy, make_job, round_now
from tests.service.test_rounds_tasks import scrape


def check_windowed_hours(capture: Callable, staff_api: APIClient) -> None:
    a_tenant, token = Tenant.create_with_owner("team-qa", quota_gpus=2, username="qa")
    c_tenant, _ = Tenant.create_with_owner("team-qc", quota_gpus=2, username="qc")
    now = timezone.now()
    a = make_job(a_tenant, "a-first", iteration_time_s=100.0, submitted_at=now - timedelta(hours=2))
    c = make_job(c_tenant, "c-later", iteration_time_s=100.0, submitted_at=now - timedelta(hours=1))
    first = round_now(
        capture, now=now - timedelta(hours=2), policy=FixedPolicy(starts=(core.Start(a.pk, (0,), 128, 1),))
    )
    second = round_now(
        capture, now=now - timedelta(hours=1), policy=FixedPolicy(starts=(core.Start(c.pk, (0,), 128, 1),))
    )
    assert first is not None and second is not None
    shared = Placement.objects.filter(active=True).values_list("job_id", "shared_with", "predicted_slowdown")
    xi = {job: slowdown for job, _, slowdown in shared}
    assert {(job, partner) for job, partner, _ in shared} == {(a.pk, c.pk), (c.pk, a.pk)}
    assert xi[a.pk] == xi[c.pk]  # identical jobs: the even split
    member = APIClient()
    member.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    mine = {
        w["window_s"]: w
        for w in member.get("/api/v1/tenant/", {"windows": "2h"}).json()["usage"]["gpu_hours"]
    }
    # 2 h: alone 1 h + ½ × 1 h = 1.5 GPU-h of 2 GPUs × 2 h = 4
    assert mine[7200]["gpu_hours"] == pytest.approx(1.5, abs=2e-3)
    assert mine[7200]["share_of_quota"] == pytest.approx(0.375, abs=1e-3)
    body = staff_api.get("/api/v1/admin/usage/", {"windows": "2h"}).json()
    hours = {t["name"]: t["gpu_hours"][0]["gpu_hours"] for t in body["tenants"]}
    assert hours == {"team-qa": pytest.approx(1.5, abs=2e-3), "team-qc": pytest.approx(0.5, abs=2e-3)}
    # both demanded for at least half the window; x = 1.5/2 and 0.5/2: Jain = 1 / (2 × 0.625) = 0.8
    assert body["fairness"][0]["jain_index"] == pytest.approx(0.8, abs=2e-3)
    assert service.quota_use()[a_tenant.pk].total.gpus_in_use == 1
    values = scrape()  # /metrics: the default windows, 2 h and 24 h
    assert values[
        ("sharewise_tenant_gpu_hours", (("tenant", "team-qc"), ("window", "7200s")))
    ] == pytest.approx(0.5, abs=2e-3)
    assert values[("sharewise_window_jain_index", (("window", "7200s"),))] == pytest.approx(0.8, abs=2e-3)


def test_windowed_gpu_hours_after_live_rounds(
    cluster: list[Node], staff_api: APIClient, django_capture_on_commit_callbacks: Callable
) -> None:
    check_windowed_hours(django_capture_on_commit_callbacks, staff_api)


@pytest.mark.postgres
def test_windowed_gpu_hours_after_live_rounds_on_postgresql(
    cluster: list[Node], staff_api: APIClient, django_capture_on_commit_callbacks: Callable
) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...)")
    check_windowed_hours(django_capture_on_commit_callbacks, staff_api)
