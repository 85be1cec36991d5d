"""Fixtures for dashboard tests: the API tests' cluster and people (Alice and Bob in ``team-a``,
Charlie in ``team-c``), logged in with Django sessions, and helpers that place jobs on GPUs."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from cluster.models import GPU, Job, Node, Placement, Tenant
from frontend.payloads import cluster_map, decisions, memo, queue_order, rounds, timeline_rows
from frontend.payloads.common import Viewer, viewer_of
from scheduling.service import closed_charge, closed_runs
from tests.api import conftest as api_fixtures


@pytest.fixture(autouse=True)
def _fresh_caches() -> Any:
    """Every cache the dashboard keeps dropped around each test: the shared cache (the closed
    charge's entries), this process's kept bodies (``memo``), cluster-map cells
    (``cluster_map``), rows of rounds (``decisions``), charge (``closed_charge``, its open
    part's per-GPU segments too), runs of finished jobs (``closed_runs``), queue order
    (``queue_order``) and timeline rows (``timeline_rows``). A database rolled back may give the
    next test's jobs the same ids, hence the same fingerprints, so a kept entry would be taken
    for the new rows."""
    forget_all()
    yield
    forget_all()


def forget_all() -> None:
    """Drop every cache of the dashboard (:func:`_fresh_caches`)."""
    cache.clear()
    memo.forget()
    cluster_map.forget()
    decisions.forget()
    rounds.forget()
    closed_charge.forget()
    closed_runs.forget()
    queue_order.forget()
    timeline_rows.forget()


# The API tests' fixtures, shared as they are (the same cluster and the same three people).
cluster, tenant_a, tenant_c = api_fixtures.cluster, api_fixtures.tenant_a, api_fixtures.tenant_c
alice, bob, charlie = api_fixtures.alice, api_fixtures.bob, api_fixtures.charlie

PASSWORD = "correct-horse-battery-staple"


def session_client(user: Any) -> Client:
    """A test client logged in as ``user`` (Django session)."""
    client = Client()
    client.force_login(user)
    return client


def make_job(
    tenant: Tenant,
    name: str,
    *,
    gpus: int = 1,
    status: str = Job.Status.PENDING,
    submitted_at: datetime | None = None,
    model: str = "resnet50",
    batch_size: int = 128,
    **extra: Any,
) -> Job:
    """A job of ``tenant`` written directly (no API, no throttle)."""
    return Job.objects.create(
        tenant=tenant,
        name=name,
        model=model,
        batch_size=batch_size,
        iterations=1000,
        gpus=gpus,
        status=status,
        submitted_at=submitted_at or timezone.now(),
        **extra,
    )


def place(
    job: Job,
    gpu: GPU,
    *,
    slot: int = 0,
    sub_batch: int | None = None,
    since: datetime | None = None,
    generation: int = 1,
) -> Placement:
    """Put ``job`` on ``gpu`` (an active placement) and mark it running."""
    start = since or timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING, started_at=start)
    return Placement.objects.create(
        job=job,
        gpu=gpu,
        slot=slot,
        sub_batch=sub_batch or job.batch_size,
        generation=generation,
        created_at=start,
    )


def gpu(node: str, index: int) -> GPU:
    """The GPU ``node``:``index``."""
    return GPU.objects.get(node__name=node, index=index)


@pytest.fixture
def viewers(cluster: list[Node], alice: Any, charlie: Any) -> list[Viewer]:
    """An admin, a member of team-a (Alice) and a member of team-c (Charlie), as the dashboard's
    payloads take them (the kept-state tests compare each one's body with one built afresh)."""
    admin = get_user_model().objects.create_user("viewer-admin", is_staff=True)
    out = [viewer_of(u) for u in (admin, alice, charlie)]
    assert all(v is not None for v in out)
    return [v for v in out if v is not None]


@pytest.fixture
def alice_web(alice: Any, cluster: list[Node]) -> Client:
    return session_client(alice)


@pytest.fixture
def bob_web(bob: Any, cluster: list[Node]) -> Client:
    return session_client(bob)


@pytest.fixture
def charlie_web(charlie: Any, cluster: list[Node]) -> Client:
    return session_client(charlie)


@pytest.fixture
def admin_web(db: None, cluster: list[Node]) -> Client:
    """A cluster admin (``is_staff``, no tenant)."""
    return session_client(get_user_model().objects.create_user("root-admin", is_staff=True))


@pytest.fixture
def shared_cluster(tenant_a: Tenant, tenant_c: Tenant, cluster: list[Node]) -> dict[str, Job]:
    """A's ``a-train`` and C's ``c-train`` share node-00:0 (slots 0 and 1, sub-batches 64 and 32);
    A's ``a-solo`` runs alone on node-00:1 and node-00:2; A's ``a-wait`` and C's ``c-wait`` wait."""
    jobs = {
        "a-train": make_job(tenant_a, "a-train"),
        "c-train": make_job(tenant_c, "c-train", model="vgg16", batch_size=64),
        "a-solo": make_job(tenant_a, "a-solo", gpus=2),
        "a-wait": make_job(tenant_a, "a-wait", submitted_at=timezone.now() - timedelta(minutes=10)),
        "c-wait": make_job(tenant_c, "c-wait", submitted_at=timezone.now() - timedelta(minutes=20)),
    }
    place(jobs["a-train"], gpu("node-00", 0), slot=0, sub_batch=64)
    place(jobs["c-train"], gpu("node-00", 0), slot=1, sub_batch=32)
    place(jobs["a-solo"], gpu("node-00", 1))
    place(jobs["a-solo"], gpu("node-00", 2))
    for job in jobs.values():
        job.refresh_from_db()
    return jobs
