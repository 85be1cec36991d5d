"""Model methods: cancelling by conditional UPDATE, submission, tokens, the largest gang."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from cluster.models import (
    GPU,
    IdempotencyConflict,
    Job,
    JobEvent,
    Node,
    Placement,
    Tenant,
    largest_gang,
)

FIELDS = {"name": "bert", "model": "bert-base", "batch_size": 32, "iterations": 500, "gpus": 4}


def test_cancel_changes_the_row_once(tenant_a: Tenant, alice: Any) -> None:
    job, _ = Job.submit(tenant_a, alice, FIELDS)
    stale = Job.objects.get(pk=job.pk)  # a second copy, as another request would hold
    assert job.cancel() is True
    assert stale.cancel() is False  # the conditional UPDATE matched no row
    assert stale.status == Job.Status.CANCELLED  # and the stale copy was refreshed
    assert list(job.events.values_list("kind", flat=True)) == ["submitted", "cancelled"]


@pytest.mark.parametrize("status", [Job.Status.SUCCEEDED, Job.Status.FAILED])
def test_finished_jobs_cannot_be_cancelled(tenant_a: Tenant, alice: Any, status: str) -> None:
    job, _ = Job.submit(tenant_a, alice, FIELDS)
    Job.objects.filter(pk=job.pk).update(status=status)
    assert job.cancel() is False
    assert Job.objects.get(pk=job.pk).status == status
    assert not JobEvent.objects.filter(job=job, kind="cancelled").exists()


def test_cancel_ends_active_placements(tenant_a: Tenant, alice: Any, cluster: list[Node]) -> None:
    job, _ = Job.submit(tenant_a, alice, FIELDS)
    for gpu in GPU.objects.filter(node=cluster[0]):
        Placement.objects.create(job=job, gpu=gpu, generation=1, sub_batch=8)
    job.cancel()
    assert Placement.objects.filter(job=job, active=True).count() == 0
    assert Placement.objects.filter(job=job, ended_at__isnull=False).count() == 4


def test_a_placement_never_ends_before_it_began(tenant_a: Tenant, alice: Any, cluster: list[Node]) -> None:
    # the round that wrote the row ran on a clock 60 s ahead of the process that cancels the job
    job, _ = Job.submit(tenant_a, alice, FIELDS)
    ahead = timezone.now() + timedelta(seconds=60)
    gpu = GPU.objects.filter(node=cluster[0]).first()
    Placement.objects.create(job=job, gpu=gpu, generation=1, sub_batch=8, created_at=ahead)
    job.cancel()
    row = Placement.objects.get(job=job)
    assert row.ended_at == row.created_at == ahead  # an empty interval, not a negative one


def test_submit_replays_and_detects_conflicts(tenant_a: Tenant, alice: Any) -> None:
    first, created = Job.submit(tenant_a, alice, FIELDS, idempotency_key="k")
    again, created_again = Job.submit(
        tenant_a, alice, dict(reversed(list(FIELDS.items()))), idempotency_key="k"
    )
    assert (created, created_again, again.pk) == (True, False, first.pk)
    with pytest.raises(IdempotencyConflict):
        Job.submit(tenant_a, alice, {**FIELDS, "gpus": 2}, idempotency_key="k")


def test_node_tokens_are_stored_hashed(db: None) -> None:
    node, token = Node.register("node-x", 2, 16_000, "v100")
    node.refresh_from_db()
    assert token not in node.agent_token_hash and len(node.agent_token_hash) == 64
    assert node.check_agent_token(token) and not node.check_agent_token(token + "x")
    assert list(node.gpus.values_list("index", "memory_mb", "gpu_type", "healthy")) == [
        (0, 16_000, "v100", True),
        (1, 16_000, "v100", True),
    ]
    assert len(set(node.gpus.values_list("uuid", flat=True))) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("node-x", 0, 16_000, "v100"), "1 to 64 GPUs"),
        (("node-x", 65, 16_000, "v100"), "1 to 64 GPUs"),
        (("node-x", 2, 0, "v100"), "GPU memory"),
        (("node-x", 2, 16_000, ""), "GPU type"),
        (("Node X", 2, 16_000, "v100"), "bad node name"),
    ],
)
def test_node_register_rejects_bad_input(db: None, args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Node.register(*args)
    assert not Node.objects.exists()


def test_largest_gang_counts_schedulable_gpus(cluster: list[Node]) -> None:
    assert largest_gang() == 8  # 2 nodes x 4 GPUs
    GPU.objects.filter(node=cluster[0], index__in=[0, 1]).update(healthy=False)
    assert largest_gang() == 6  # 8 - 2 unhealthy GPUs
    Node.objects.filter(pk=cluster[1].pk).update(status=Node.Status.UNHEALTHY)
    assert largest_gang() == 2  # 6 - the 4 GPUs of the unhealthy node
    Node.objects.filter(pk=cluster[1].pk).update(status=Node.Status.DRAINING)
    assert largest_gang() == 6  # a draining node's GPUs still exist for gangs
    assert largest_gang() == GPU.objects.schedulable().count()  # the SQL and the ORM query agree


def test_tenant_usage(tenant_a: Tenant, alice: Any) -> None:
    for gpus, status in [(4, "running"), (2, "running"), (8, "pending"), (1, "succeeded")]:
        job, _ = Job.submit(tenant_a, alice, {**FIELDS, "gpus": gpus})
        Job.objects.filter(pk=job.pk).update(status=status)
    assert tenant_a.gpus_in_use() == 6  # running gangs 4 + 2
    assert tenant_a.guaranteed_gpus() == 4
    assert tenant_a.job_counts() == {"pending": 1, "running": 2, "succeeded": 1, "failed": 0, "cancelled": 0}
