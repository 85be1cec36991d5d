"""Database constraints carry the invariants, whatever code writes the rows (TESTING.md 1, 3)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, transaction

from cluster.models import GPU, Job, JobEvent, Node, Placement, Quota, Tenant


def make_job(tenant: Tenant, name: str = "j", **fields: Any) -> Job:
    values = {"model": "resnet50", "batch_size": 64, "iterations": 100, "gpus": 1, **fields}
    return Job.objects.create(tenant=tenant, name=name, **values)


def violates(create: Any) -> bool:
    """Whether ``create()`` is refused by the database (IntegrityError), leaving no row."""
    try:
        with transaction.atomic():
            create()
    except IntegrityError:
        return True
    return False


@pytest.fixture
def gpu(cluster: list[Node]) -> GPU:
    return GPU.objects.get(node__name="node-00", index=0)


def test_a_gpu_holds_at_most_two_active_placements(tenant_a: Tenant, gpu: GPU) -> None:
    a, b, c = (make_job(tenant_a, name) for name in "abc")
    Placement.objects.create(job=a, gpu=gpu, generation=1, sub_batch=32, slot=0)
    Placement.objects.create(job=b, gpu=gpu, generation=1, sub_batch=32, slot=1)
    # A third job has no free slot: slot 0 and 1 are taken, slot 2 is out of range.
    assert violates(lambda: Placement.objects.create(job=c, gpu=gpu, generation=1, sub_batch=32, slot=0))
    assert violates(lambda: Placement.objects.create(job=c, gpu=gpu, generation=1, sub_batch=32, slot=1))
    assert violates(lambda: Placement.objects.create(job=c, gpu=gpu, generation=1, sub_batch=32, slot=2))
    assert Placement.objects.filter(gpu=gpu, active=True).count() == 2


def test_ended_placements_free_their_slot(tenant_a: Tenant, gpu: GPU) -> None:
    a, b = make_job(tenant_a, "a"), make_job(tenant_a, "b")
    Placement.objects.create(job=a, gpu=gpu, generation=1, sub_batch=32, slot=0)
    Placement.objects.filter(job=a).update(active=False)
    Placement.objects.create(job=b, gpu=gpu, generation=2, sub_batch=32, slot=0)
    assert Placement.objects.filter(gpu=gpu).count() == 2


def test_a_job_is_on_a_gpu_at_most_once(tenant_a: Tenant, gpu: GPU) -> None:
    job = make_job(tenant_a)
    Placement.objects.create(job=job, gpu=gpu, generation=1, sub_batch=32, slot=0)
    assert violates(lambda: Placement.objects.create(job=job, gpu=gpu, generation=1, sub_batch=32, slot=1))


def test_sub_batch_must_be_positive(tenant_a: Tenant, gpu: GPU) -> None:
    job = make_job(tenant_a)
    assert violates(lambda: Placement.objects.create(job=job, gpu=gpu, generation=1, sub_batch=0))


def test_quotas_are_non_negative_and_one_per_type(tenant_a: Tenant) -> None:
    assert violates(lambda: Quota.objects.create(tenant=tenant_a, guaranteed_gpus=-1, gpu_type="a100"))
    assert violates(
        lambda: Quota.objects.create(tenant=tenant_a, guaranteed_gpus=1, borrow_limit=-1, gpu_type="a")
    )
    # team-a's fixture quota is for any type ("").
    assert violates(lambda: Quota.objects.create(tenant=tenant_a, guaranteed_gpus=1))
    Quota.objects.create(tenant=tenant_a, guaranteed_gpus=0, borrow_limit=0, gpu_type="a100")


def test_idempotency_key_is_unique_per_tenant(tenant_a: Tenant, tenant_c: Tenant) -> None:
    make_job(tenant_a, "a", idempotency_key="k")
    assert violates(lambda: make_job(tenant_a, "b", idempotency_key="k"))
    make_job(tenant_c, "c", idempotency_key="k")
    make_job(tenant_a, "d")
    make_job(tenant_a, "e")  # many jobs without a key
    assert Job.objects.count() == 4


@pytest.mark.parametrize(
    "fields",
    [
        {"gpus": 0},
        {"batch_size": 0},
        {"iterations": 0},
        {"iterations_done": -1.0},
        {"iteration_time_s": 0.0},
        {"status": "sleeping"},
    ],
)
def test_job_checks(tenant_a: Tenant, fields: dict[str, Any]) -> None:
    assert violates(lambda: make_job(tenant_a, **fields))


def test_gpu_index_is_unique_per_node(cluster: list[Node]) -> None:
    node = cluster[0]
    assert violates(lambda: GPU.objects.create(node=node, index=0, uuid="GPU-dup", memory_mb=1000))


def test_job_events_are_append_only(tenant_a: Tenant) -> None:
    event = JobEvent.objects.create(job=make_job(tenant_a), kind=JobEvent.Kind.SUBMITTED)
    event.message = "rewritten"
    with pytest.raises(TypeError, match="append-only"):
        event.save()
    with pytest.raises(TypeError, match="append-only"):
        JobEvent.objects.filter(pk=event.pk).update(message="rewritten")
    assert JobEvent.objects.get(pk=event.pk).message == ""
