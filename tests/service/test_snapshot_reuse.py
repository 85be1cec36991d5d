"""A pending job whose inputs did not change since the last snapshot is the same core job again,
without its fields being worked out anew (``scheduling.service.snapshot.load_state``, issue 16
item 3); each input that does change must give the job its new fields: its row, its class's
learned record, its own samples, its requeue time, and the profile table of the estimates.

Each test reads the job once (so that it is kept), changes one input, and reads it again.
Job: ResNet-18, global batch 128, one GPU, 1,000 iterations, no declared iteration time or memory.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from django.utils import timezone

from cluster.models import Job, JobEvent, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.models import JobIterTime, LearnedIterTime
from scheduling.service.estimates import UNKNOWN_MODEL_ITER_TIME_S
from scheduling.service.knowledge import learned_profile
from scheduling.service.snapshot import forget_kept_jobs
from tests.service.learning_helpers import make_fleet, make_job, run_round


@pytest.fixture
def tenant(db: None) -> Tenant:
    return Tenant.create_with_owner("team-a", quota_gpus=8)[0]


@pytest.fixture
def job(tenant: Tenant) -> Job:
    return make_job(tenant, "a")


def seen(job: Job, profile: core.Profile | None = None) -> core.Job:
    """The job as a snapshot reads it now."""
    return service.load_state(profile=profile).jobs[job.pk]


def test_an_unchanged_pending_job_is_the_same_object(job: Job) -> None:
    first = seen(job)
    assert seen(job) is first


def test_a_changed_row_gives_new_fields(job: Job) -> None:
    first = seen(job)
    Job.objects.filter(pk=job.pk).update(priority=3, iteration_time_s=0.25)
    again = seen(job)
    assert (again.priority, again.iter_time_s) == (3, 0.25)  # declared beats the profile
    assert again.remaining_time_s == 1000 * 0.25 and first.priority == 0


def test_a_class_record_learned_meanwhile_reaches_the_job(job: Job) -> None:
    assert seen(job).memory_mb is None  # nothing declared, measured or learned
    # a job of its class (resnet18, 128, 1 GPU) reported 9,000 MB; no iteration sample (count 0)
    LearnedIterTime.objects.create(model="resnet18", batch_size=128, gpus=1, memory_mb=9000.0)
    assert seen(job).memory_mb == 9000.0  # the largest its class reported


def test_samples_of_its_own_reach_the_job(job: Job) -> None:
    assert seen(job).iter_time_s != pytest.approx(2.0)
    # measured alone: 3 samples with ln(t) averaging ln 2 → t = exp(ln 2) = 2 s
    JobIterTime.objects.create(job=job, count=3, weight=3.0, mean_log=math.log(2.0), var_log=0.0)
    assert seen(job).iter_time_s == pytest.approx(2.0)  # measured for this job beats the profile


def test_a_requeue_restarts_the_jobs_wait(job: Job) -> None:
    assert seen(job).queued_since is None
    at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    # it ran before (started_at set) and was put back in the queue at ``at``
    Job.objects.filter(pk=job.pk).update(started_at=at)
    JobEvent.objects.create(job=job, kind=JobEvent.Kind.REQUEUED, at=at)
    # POSIX seconds to the µs on PostgreSQL, the ms on SQLite (cluster.expressions.EpochSeconds)
    assert seen(job).queued_since == pytest.approx(at.timestamp(), abs=1e-3)


class NoThroughputs:
    """A profile table without throughputs: every job without a declared or measured time gets
    ``UNKNOWN_MODEL_ITER_TIME_S`` (``estimate_iter_time_s``)."""


def test_another_profile_table_gives_its_own_estimates(job: Job) -> None:
    shipped = seen(job, learned_profile()).iter_time_s
    assert shipped != UNKNOWN_MODEL_ITER_TIME_S  # the shipped table knows ResNet-18
    other: core.Profile = NoThroughputs()  # type: ignore[assignment]
    assert seen(job, other).iter_time_s == UNKNOWN_MODEL_ITER_TIME_S


def test_kept_jobs_give_the_snapshot_a_fresh_read_gives(
    tenant: Tenant, django_capture_on_commit_callbacks: Any
) -> None:
    """Kept against from scratch: over rounds where, each time, a pending job's row, a class's
    record, a job's own samples and a requeue change, the snapshot built from the kept jobs equals
    the one built after forgetting them (seeded; 2 nodes × 4 GPUs, 14 jobs of 1–4 GPUs)."""
    make_fleet()
    rng = random.Random(16)
    shapes = [("resnet18", 128), ("resnet50", 64), ("vgg16", 64), ("lm", 80)]
    jobs = [
        make_job(tenant, f"j{i}", model=m, batch_size=b, gpus=rng.choice((1, 1, 2, 4)), iterations=10**6)
        for i, (m, b) in enumerate(rng.choice(shapes) for _ in range(14))
    ]
    service.load_state()  # kept from here on
    for step in range(6):
        now = timezone.now()
        pending = list(Job.objects.filter(status=Job.Status.PENDING).order_by("pk"))
        if pending:
            Job.objects.filter(pk=rng.choice(pending).pk).update(priority=rng.randint(0, 5))
            job = rng.choice(pending)
            JobIterTime.objects.update_or_create(
                job=job, defaults={"count": 2, "weight": 2.0, "mean_log": rng.uniform(-2, 0), "var_log": 0.0}
            )
        model, batch = shapes[step % len(shapes)]
        LearnedIterTime.objects.update_or_create(
            model=model, batch_size=batch, gpus=1, defaults={"memory_mb": 1000.0 + 500 * step}
        )
        running = list(Job.objects.filter(status=Job.Status.RUNNING).values_list("pk", flat=True))
        if running:
            service.requeue([rng.choice(running)], now, "the test puts it back")
        kept = service.load_state(now).snapshot
        forget_kept_jobs()
        assert kept == service.load_state(now).snapshot, f"step {step}"
        run_round(django_capture_on_commit_callbacks, "sjf-bsbf")
    assert len(jobs) == 14 and Job.objects.exclude(started_at=None).exists()  # rounds did start jobs
