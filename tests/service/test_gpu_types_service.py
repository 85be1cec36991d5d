"""GPU types through the API and a live round (scheduling/service/gpu_types.py, snapshot.py,
cluster/serializers.py). Cluster: node-00 with two 81,920 MB a100s (GPUs 0, 1 in the snapshot),
node-01 with two 16,384 MB t4s (GPUs 2, 3). Runs on SQLite; the PostgreSQL-marked copy of the
round reads the JSON column through the snapshot's bare cursor on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from cluster.models import GPU, Job, Node, Placement, Quota, Tenant
from scheduling import service
from tests.api.conftest import JOBS_URL, job_body, token_client
from tests.conftest import skip_or_fail
from tests.service.test_rounds import make_job, round_now


@pytest.fixture
def mixed(db: None) -> list[Node]:
    return [Node.register("node-00", 2, 81_920, "a100")[0], Node.register("node-01", 2, 16_384, "t4")[0]]


@pytest.fixture
def api(alice: object, mixed: list[Node]) -> APIClient:
    """Alice's client on the mixed cluster (the shared ``alice_api`` brings the v100 cluster)."""
    return token_client(alice)


def gpu_types_held(job: Job) -> list[str]:
    ids = Placement.objects.filter(job=job, active=True).values_list("gpu_id", flat=True)
    return sorted(GPU.objects.filter(pk__in=list(ids)).values_list("gpu_type", flat=True))


def test_the_api_takes_validates_and_shows_gpu_types(api: APIClient) -> None:
    made = api.post(JOBS_URL, job_body(gpus=1, gpu_types=["a100", "a100"]), format="json")
    assert made.status_code == 201, made.content
    assert made.json()["gpu_types"] == ["a100"]  # duplicates dropped
    shown = api.get(f"{JOBS_URL}{made.json()['id']}/")
    assert shown.json()["gpu_types"] == ["a100"]
    assert api.post(JOBS_URL, job_body(gpus=1), format="json").json()["gpu_types"] == []
    unknown = api.post(JOBS_URL, job_body(gpus=1, gpu_types=["h100"]), format="json")
    assert unknown.status_code == 400
    message = "unknown GPU type 'h100'; the cluster's GPU types are: a100, t4"
    assert unknown.json()["fields"]["gpu_types"] == [message]
    too_many = api.post(JOBS_URL, job_body(gpus=3, gpu_types=["a100"]), format="json")
    assert too_many.status_code == 400
    assert "at most 2 GPUs of type a100" in too_many.json()["fields"]["gpus"][0]
    bad = api.post(JOBS_URL, job_body(gpus=1, gpu_types="a100"), format="json")
    assert bad.status_code == 400 and "gpu_types" in bad.json()["fields"]


def test_memory_beyond_every_accepted_type_is_400(api: APIClient) -> None:
    # batch 1: no smaller sub-batch, so 40,000 MB per GPU must fit as is: a t4 has 16,384 MB
    body = job_body(gpus=1, batch_size=1, gpu_memory_mb=40_000, gpu_types=["t4"])
    refused = api.post(JOBS_URL, body, format="json")
    assert refused.status_code == 400
    assert "largest healthy GPU of type t4 (16384 MB)" in refused.json()["fields"]["gpu_memory_mb"][0]
    body["gpu_types"] = ["t4", "a100"]  # an a100 holds it
    assert api.post(JOBS_URL, body, format="json").status_code == 201


def live_round(tenant: Tenant, capture: Callable) -> None:
    pinned = make_job(tenant, "pinned", gpu_types=["a100"], iteration_time_s=0.1)
    small = make_job(tenant, "small", iteration_time_s=0.1, gpu_memory_mb=1_000)
    Quota.objects.create(tenant=tenant, gpu_type="a100", guaranteed_gpus=1, borrow_limit=0)
    over = make_job(tenant, "over", gpu_types=["a100"], iteration_time_s=0.1)
    snap = service.build_snapshot()
    assert {j.id: j.gpu_types for j in snap.pending} == {
        pinned.pk: ("a100",),
        small.pk: (),
        over.pk: ("a100",),
    }
    assert snap.type_quotas == {tenant.name: {"a100": snap.type_quotas[tenant.name]["a100"]}}
    record = round_now(capture)
    assert record is not None
    got = {d["job_id"]: (d["action"], d["reason"]) for d in record.decision_list()}
    # SJF order: same P_j, submit order → pinned first: an a100; small (any type): the smallest
    # sufficient GPU, a t4; over: tenant's a100 cap 1 + 0 is taken → waits, the cap named
    assert gpu_types_held(pinned) == ["a100"]
    assert gpu_types_held(small) == ["t4"]
    assert got[over.pk][0] == "wait" and "per-type quota" in got[over.pk][1] and "a100" in got[over.pk][1]


@override_settings(SHAREWISE_POLICY="sjf-bsbf-fair")
def test_a_live_round_places_by_type_and_caps_per_type(
    mixed: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    live_round(tenant_a, django_capture_on_commit_callbacks)


@pytest.mark.postgres
@override_settings(SHAREWISE_POLICY="sjf-bsbf-fair")
def test_a_live_round_with_gpu_types_on_postgresql(
    mixed: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...): the JSON column through a bare cursor")
    live_round(tenant_a, django_capture_on_commit_callbacks)
