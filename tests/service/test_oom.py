"""Out-of-memory feedback through live rounds (SQLite or PostgreSQL): a co-located job that runs out
of memory goes back to the queue, its pair is marked incompatible at those sub-batches, and the
next round does not repeat it; retries are bounded; a job out of memory alone fails.

Fleet: node-00 and node-01, four 16,000 MB V100s each (tests/service/learning_helpers.py).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import override_settings

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from scheduling.models import IncompatiblePair
from tests.service.invariants import assert_invariants
from tests.service.learning_helpers import co_located, make_fleet, make_job, report, run_round

OOM = {
    "event": "failed",
    "failure_kind": "oom",
    "reason": "exit code 1: torch.OutOfMemoryError: CUDA out of memory",
}


@pytest.fixture
def fleet(db: None) -> dict[str, tuple[Node, str]]:
    return make_fleet()


@pytest.fixture
def tenant(db: None) -> Tenant:
    return Tenant.create_with_owner("team-a", quota_gpus=8)[0]


def residents(tenant: Tenant, capture: Callable) -> tuple[Job, Job]:
    """Two long 4-GPU jobs alone on the two nodes: VGG-19 (batch 16) and ResNet-18 (batch 128)."""
    vgg = make_job(
        tenant, "vgg", model="vgg19", batch_size=16, gpus=4, iterations=100_000, iteration_time_s=0.5
    )
    resnet = make_job(tenant, "resnet", gpus=4, iterations=100_000, iteration_time_s=0.5)
    run_round(capture)
    assert not co_located()
    return vgg, resnet


def partner_and_sub(job: Job) -> tuple[set[int], int]:
    rows = Placement.objects.filter(job=job, active=True)
    gpus = list(rows.values_list("gpu_id", flat=True))
    others = set(
        Placement.objects.filter(active=True, gpu_id__in=gpus)
        .exclude(job=job)
        .values_list("job_id", flat=True)
    )
    return others, rows.values_list("sub_batch", flat=True).first()


def test_an_oom_in_a_shared_pair_is_not_retried_with_the_same_partner(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    vgg, resnet = residents(tenant, capture)
    # a short 1-GPU ResNet-18: sjf-bsbf pairs it with the other ResNet-18 (ξ 1.28/1.28, the best
    # benefit) at sub-batch 128
    short = make_job(tenant, "short", iterations=1000, iteration_time_s=0.2)
    run_round(capture)
    partners, sub = partner_and_sub(short)
    assert (partners, sub) == ({resnet.pk}, 128)

    answer = report(fleet, short, capture, iterations_done=40, **OOM)
    assert answer.status_code == 200 and answer.json()["status"] == "pending"
    short.refresh_from_db()
    assert (short.status, short.oom_retries, short.iterations_done) == ("pending", 1, 40.0)
    requeued = JobEvent.objects.filter(job=short, kind="requeued").get()
    assert (
        f"out of memory beside job {resnet.pk}" in requeued.message and requeued.data["failure_kind"] == "oom"
    )
    pair = IncompatiblePair.objects.get()
    assert (pair.model_a, pair.sub_a, pair.model_b, pair.sub_b) == ("resnet18", 128, "resnet18", 128)
    assert {pair.job, pair.partner} == {short.pk, resnet.pk} and "CUDA out of memory" in pair.reason
    assert Job.objects.get(pk=resnet.pk).status == "running"  # the partner keeps running

    # the next round places it elsewhere: beside the VGG-19, not the ResNet-18 again
    run_round(capture)
    partners, sub = partner_and_sub(short)
    assert partners == {vgg.pk}
    assert frozenset({short.pk, resnet.pk}) not in co_located()
    assert_invariants()


def test_out_of_memory_retries_are_bounded(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    residents(tenant, capture)
    short = make_job(tenant, "short", iterations=1000, iteration_time_s=0.2)
    with override_settings(SHAREWISE_OOM_RETRIES=1):
        run_round(capture)
        report(fleet, short, capture, iterations_done=10, **OOM)  # retry 1 of 1
        assert Job.objects.get(pk=short.pk).status == "pending"
        run_round(capture)  # beside the VGG-19 now
        assert partner_and_sub(short)[0]
        report(fleet, short, capture, iterations_done=20, **OOM)
    short.refresh_from_db()
    assert short.status == "failed" and short.oom_retries == 1
    assert (
        short.failure_reason.startswith("out of memory beside job")
        and "after 1 retries" in short.failure_reason
    )
    assert IncompatiblePair.objects.count() == 2  # both pairs it ran out of memory in


def test_a_job_out_of_memory_alone_fails(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = make_job(tenant, "alone", iteration_time_s=0.2)
    run_round(capture)
    report(fleet, job, capture, iterations_done=5, **OOM)
    job.refresh_from_db()
    assert job.status == "failed" and job.failure_reason.startswith("out of memory alone: exit code 1")
    assert not IncompatiblePair.objects.exists()


def test_both_jobs_of_a_pair_out_of_memory_are_both_requeued(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """The second report arrives after the first ended its placement (and the partner update was
    sent): the partner that left moments ago is still blamed, not "alone"."""
    capture = django_capture_on_commit_callbacks
    _, resnet = residents(tenant, capture)
    short = make_job(tenant, "short", iterations=1000, iteration_time_s=0.2)
    run_round(capture)
    node = Placement.objects.filter(job=resnet, active=True, shared_with=short.pk).values_list(
        "gpu__node__name", flat=True
    )[0]
    old_generation = Placement.objects.filter(job=resnet, active=True).values_list("generation", flat=True)[0]
    report(fleet, short, capture, iterations_done=10, **OOM)
    report(fleet, resnet, capture, node, generation=old_generation, iterations_done=10, **OOM)
    assert Job.objects.get(pk=resnet.pk).status == "pending"
    assert IncompatiblePair.objects.count() == 1
