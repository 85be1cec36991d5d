"""The queue's kept order (``frontend.payloads.queue_order``): the queue JSON with the order kept
between polls is byte for byte the JSON built from scratch (the kept order dropped first), at a
frozen now, for an admin and a member, after each kind of change — a new round, a submission, a
job started, one cancelled, one requeued, a deletion, a tenant deleted; an unchanged poll does
not build the order again; the fingerprint tells apart two sets of pending jobs of equal count
and sum of ids."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Job, Node, Tenant
from frontend.payloads import queue_order
from scheduling.models import Round
from scheduling.round_waits import wait_entry
from tests.frontend.conftest import make_job

NOW = timezone.now()


def record_waits(jobs: list[Job]) -> Round:
    """A round that lists ``jobs`` as waits, in that order."""
    return Round.objects.create(
        policy="sjf-bsbf",
        duration_ms=1.0,
        n_started=0,
        n_waiting=len(jobs),
        n_preempted=0,
        decisions=[wait_entry(j.pk, f"rank {k + 1}") for k, j in enumerate(jobs)],
        finished_at=NOW - timedelta(seconds=30),
    )


def poll(client: Client) -> bytes:
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        response = client.get("/dashboard/api/queue.json", {"limit": 3})
    assert response.status_code == 200, response.content
    return response.content


def assert_kept_equals_afresh(client: Client) -> None:
    poll(client)  # the order built (or kept) by a first poll
    kept = poll(client)
    queue_order.forget()
    assert kept == poll(client)


@pytest.mark.parametrize("viewer", ["admin_web", "alice_web"])
def test_the_kept_queue_order_follows_every_change(
    cluster: list[Node], tenant_a: Tenant, tenant_c: Tenant, viewer: str, request: Any
) -> None:
    client = request.getfixturevalue(viewer)
    jobs = [
        make_job(tenant_a if k % 2 else tenant_c, f"w{k}", submitted_at=NOW - timedelta(minutes=30 - k))
        for k in range(8)
    ]
    assert_kept_equals_afresh(client)  # no round yet: arrival order
    record_waits(list(reversed(jobs[:6])))  # w6 and w7 not ranked: they follow by arrival
    assert_kept_equals_afresh(client)
    make_job(tenant_a, "new", submitted_at=NOW - timedelta(minutes=1))  # a submission
    assert_kept_equals_afresh(client)
    Job.objects.filter(pk=jobs[5].pk).update(status=Job.Status.RUNNING, started_at=NOW)  # started
    assert_kept_equals_afresh(client)
    Job.objects.filter(pk=jobs[3].pk).update(status=Job.Status.CANCELLED, finished_at=NOW)  # cancelled
    assert_kept_equals_afresh(client)
    Job.objects.filter(pk=jobs[5].pk).update(status=Job.Status.PENDING)  # requeued
    assert_kept_equals_afresh(client)
    jobs[1].delete()
    assert_kept_equals_afresh(client)
    record_waits([jobs[7], jobs[0]])  # a new round
    assert_kept_equals_afresh(client)
    tenant_c.delete()
    assert_kept_equals_afresh(client)
    body = poll(client).decode()
    if viewer == "alice_web":
        assert "team-c" not in body and "w1" not in body and "w7" in body
    else:
        assert "w0" not in body and "w7" in body  # team-c's jobs gone with it


def test_an_unchanged_poll_keeps_the_order_and_a_member_its_positions(
    cluster: list[Node], tenant_a: Tenant, tenant_c: Tenant, alice_web: Client, admin_web: Client
) -> None:
    jobs = [make_job(tenant_a if k % 2 else tenant_c, f"w{k}") for k in range(4)]
    record_waits(jobs)
    poll(admin_web)
    kept = queue_order.queue_order(queue_order.pending_fingerprint(), None)  # another round: built
    assert kept.ranked == tuple(j.pk for j in sorted(jobs, key=lambda j: (j.submitted_at, j.pk)))
    poll(admin_web)
    order = queue_order.kept()
    assert order is not None
    poll(alice_web)
    poll(admin_web)
    assert queue_order.kept() is order  # not built again
    assert order.ranked == tuple(j.pk for j in jobs)
    # team-a's jobs w1 and w3 at positions 2 and 4, kept for this order
    assert queue_order.positions(order, tenant_a.pk) == ((2, jobs[1].pk), (4, jobs[3].pk))
    assert queue_order.positions(order, tenant_a.pk) is queue_order.positions(order, tenant_a.pk)


def test_the_fingerprint_tells_apart_pending_sets_of_equal_count_and_id_sum(
    cluster: list[Node], tenant_a: Tenant
) -> None:
    """Jobs 5 and 8 pending, then 6 and 7: the same count, sum of ids and of tenant ids; only the
    squared ids differ (5² + 8² = 89, 6² + 7² = 85)."""
    for pk in (5, 6, 7, 8):
        make_job(tenant_a, f"j{pk}", pk=pk, status=Job.Status.PENDING if pk in (5, 8) else "running")
    before = queue_order.pending_fingerprint()
    Job.objects.filter(pk__in=[5, 8]).update(status=Job.Status.RUNNING)
    Job.objects.filter(pk__in=[6, 7]).update(status=Job.Status.PENDING)
    after = queue_order.pending_fingerprint()
    assert before[:2] == after[:2] == (2, 13) and before[3] == after[3]
    assert (before[2], after[2]) == (89, 85)
    built = queue_order.queue_order(after, None)
    assert built.ranked == (6, 7) and built.fingerprint == after
