"""Who may share a GPU, through live rounds (SQLite or PostgreSQL): a ``sharing: never`` job (or a
tenant's default) never shares, as incoming job or resident; a job of unknown memory does not share
until its memory is measured, unless ``SHAREWISE_SHARE_UNKNOWN``; a pair of unknown slowdown shares
once its slowdown was measured.

Fleet: node-00 and node-01, four 16,000 MB V100s each (tests/service/learning_helpers.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from django.test import override_settings
from django.utils import timezone

from cluster.models import Job, Node, Sharing, Tenant
from scheduling import service
from scheduling.core.learning import SampleStats
from scheduling.models import LearnedSlowdown
from tests.service.invariants import assert_invariants
from tests.service.learning_helpers import co_located, make_fleet, make_job, report, run_round


@pytest.fixture
def fleet(db: None) -> dict[str, tuple[Node, str]]:
    return make_fleet()


@pytest.fixture
def tenant(db: None) -> Tenant:
    return Tenant.create_with_owner("team-a", quota_gpus=8)[0]


def wait_reason(record: object, job: Job) -> str:
    return next(
        d["reason"] for d in record.decision_list() if d["job_id"] == job.pk and d["action"] == "wait"
    )


def long_resident(tenant: Tenant, capture: Callable, **fields: object) -> Job:
    """A long 8-GPU ResNet-18 alone on the whole cluster."""
    job = make_job(tenant, "long", gpus=8, iterations=100_000, iteration_time_s=0.5, **fields)
    run_round(capture)
    assert Job.objects.get(pk=job.pk).status == "running"
    return job


@pytest.mark.parametrize("policy", ["sjf-bsbf", "sjf-ffs", "sjf-bsbf-fair"])
def test_a_job_that_never_shares_is_never_co_located(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable, policy: str
) -> None:
    capture = django_capture_on_commit_callbacks
    long = long_resident(tenant, capture)
    # control: a short job shares with the resident (every GPU is taken)
    control = make_job(tenant, "control", iteration_time_s=0.2)
    run_round(capture, policy)
    assert co_located() == {frozenset({long.pk, control.pk})}
    Job.objects.get(pk=control.pk).cancel()
    # the same short job that says never waits
    never = make_job(tenant, "never", iteration_time_s=0.2, sharing=Sharing.NEVER)
    record = run_round(capture, policy)
    assert "it never shares a GPU (sharing: never)" in wait_reason(record, never)
    assert frozenset({long.pk, never.pk}) not in co_located()


def test_a_resident_that_never_shares_takes_no_partner(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    long_resident(tenant, capture, sharing=Sharing.NEVER)
    short = make_job(tenant, "short", iteration_time_s=0.2)
    record = run_round(capture)
    assert wait_reason(record, short) == "no idle or shareable GPU left this round"
    assert not co_located()


def test_a_tenants_default_applies_to_its_new_jobs(db: None, fleet: dict) -> None:
    tenant = Tenant.create_with_owner("careful", quota_gpus=4)[0]
    Tenant.objects.filter(pk=tenant.pk).update(default_sharing=Sharing.NEVER)
    tenant.refresh_from_db()
    fields = {"name": "j", "model": "resnet18", "batch_size": 128, "iterations": 10, "gpus": 1}
    assert Job.submit(tenant, None, fields)[0].sharing == Sharing.NEVER
    assert Job.submit(tenant, None, {**fields, "sharing": Sharing.ALLOWED})[0].sharing == Sharing.ALLOWED


@pytest.mark.parametrize("seed", range(4))
def test_never_jobs_stay_alone_over_random_live_rounds(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable, seed: int
) -> None:
    """Random jobs (a third never share), eight rounds with arrivals and finishes: no GPU ever holds
    a never job beside another job."""
    capture = django_capture_on_commit_callbacks
    rng = random.Random(seed)
    models = [("resnet18", 128), ("vgg19", 16), ("resnet50", 64), ("bert", 4), ("a2c", 64)]
    policy = rng.choice(["sjf-bsbf", "sjf-ffs", "sjf-bsbf-fair"])
    never: set[int] = set()
    for step in range(8):
        for i in range(rng.randint(1, 4)):
            model, batch = rng.choice(models)
            sharing = Sharing.NEVER if rng.random() < 1 / 3 else Sharing.ALLOWED
            job = make_job(
                tenant,
                f"j{step}-{i}",
                model=model,
                batch_size=batch,
                gpus=rng.choice([1, 1, 2, 4]),
                iterations=rng.randint(100, 100_000),
                iteration_time_s=rng.uniform(0.1, 1.0),
                sharing=sharing,
            )
            if sharing == Sharing.NEVER:
                never.add(job.pk)
        run_round(capture, policy)
        for pair in co_located():
            assert not pair & never, f"round {step}: never job shares a GPU in {set(pair)}"
        assert_invariants()
        for job in Job.objects.filter(status="running").order_by("?")[: rng.randint(0, 2)]:
            service.release(job, timezone.now(), Job.Status.SUCCEEDED, "succeeded", "")


# ------------------------------------------------------------------------------ unknown memory


def test_unknown_memory_never_shares_by_default(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    long = long_resident(tenant, capture)
    # a model the profile does not know, no declared memory: it waits rather than share
    mystery = make_job(tenant, "mystery", model="mystery-net", iteration_time_s=0.2)
    record = run_round(capture)
    assert "its memory is unknown: it runs alone until its memory is measured" in wait_reason(record, mystery)
    assert not co_located()
    # the setting lets it share on the guesses (the default ξ = 2 still pays beside a long job:
    # waiting for the resident costs more, MODEL.md §2)
    with override_settings(SHAREWISE_SHARE_UNKNOWN=True):
        run_round(capture)
    assert co_located() == {frozenset({long.pk, mystery.pk})}


def test_an_unknown_job_shares_once_its_memory_and_slowdown_were_measured(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    mystery = make_job(tenant, "mystery", model="mystery-net", batch_size=64, gpus=8, iterations=100_000)
    run_round(capture)  # alone on the whole cluster (no declared memory, no iteration time)
    short = make_job(tenant, "short", iteration_time_s=0.2)
    record = run_round(capture)
    assert wait_reason(record, short) == "no idle or shareable GPU left this round"  # memory unknown
    for node in ("node-00", "node-01"):  # the agents report 3,000 MB per GPU at sub-batch 64
        report(fleet, mystery, capture, node, iterations_done=10, iter_time_s=0.5, memory_mb=3000)
    assert Job.objects.get(pk=mystery.pk).measured_memory_mb == pytest.approx(3000)
    record = run_round(capture)
    assert not co_located()  # memory known now, but the pair's slowdown is unknown: alone still
    # both sides' slowdowns measured (ξ 1.1 each way, as if they had run together elsewhere)
    for a, sa, b, sb in (("mysterynet", 64, "resnet18", 128), ("resnet18", 128, "mysterynet", 64)):
        row = LearnedSlowdown(model_a=a, sub_a=sa, model_b=b, sub_b=sb)
        row.set_stats(SampleStats().add(1.1))
        row.save()
    run_round(capture)
    assert co_located() == {frozenset({mystery.pk, short.pk})}
