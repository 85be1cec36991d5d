"""No run starts before its job was submitted (scheduling.service.persist.run_start): a round's
clock is read before its snapshot, so a job committed while the snapshot was being read was
placed "before" its submission, with a negative queueing delay (start − submit). The placements'
``created_at``, the ``placed`` event and the job's ``started_at`` are the later of the round's
time and the job's ``submitted_at``.

The cluster fixture: node-00 and node-01, four 16,000 MB V100s each (8 GPUs)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from frontend.payloads.fairness import tenant_jobs_and_bins
from scheduling.core import types as core
from scheduling.models import Round
from scheduling.service import rounds
from tests.service.test_rounds import FixedPolicy, make_job, round_now

pytestmark = pytest.mark.usefixtures("cluster")


def run_dates(job: Job) -> tuple[set[datetime], datetime | None, set[datetime]]:
    """``(placements' created_at, started_at, placed events' at)`` of ``job`` as stored."""
    job.refresh_from_db()
    placed = set(Placement.objects.filter(job=job).values_list("created_at", flat=True))
    events = set(JobEvent.objects.filter(job=job, kind=JobEvent.Kind.PLACED).values_list("at", flat=True))
    return placed, job.started_at, events


def test_a_job_committed_while_the_round_reads_starts_no_earlier_than_its_submission(
    tenant_a: Tenant, django_capture_on_commit_callbacks: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live round (no ``now`` given) reads its clock, then its snapshot; a job is written
    between the two (the snapshot read is hooked), so its ``submitted_at`` is after the round's
    time. SJF starts it (the cluster is idle). Before the fix its placement, event and
    ``started_at`` were the round's time, before the submission (queueing delay < 0)."""
    late: list[Job] = []
    real_load_state = rounds.load_state

    def commit_a_job_then_read(now: datetime, profile: core.Profile) -> Any:
        time.sleep(0.002)  # the submission's clock surely after the round's (µs resolution)
        late.append(make_job(tenant_a, "late", iteration_time_s=1.0, gpu_memory_mb=1000))
        return real_load_state(now, profile)

    monkeypatch.setattr(rounds, "load_state", commit_a_job_then_read)
    record = round_now(django_capture_on_commit_callbacks, policy="sjf")
    assert record is not None and record.n_started == 1
    (job,) = late
    assert record.started_at < job.submitted_at  # the case: the round's clock came first
    placed, started, events = run_dates(job)
    assert placed == {job.submitted_at} and started == job.submitted_at and events == {job.submitted_at}
    assert (started - job.submitted_at).total_seconds() >= 0  # queueing delay


def test_a_run_begins_at_the_later_of_round_time_and_submission(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    """By hand, a round at T = now starting two jobs: ``early`` submitted at T − 30 s begins at T
    (queueing delay 30 s); ``late`` (2 GPUs) submitted at T + 5 s begins at T + 5 s (delay 0, not
    −5). Preempted by a round at T + 10 s, ``late`` has attained 2 GPUs × (T + 10 − (T + 5)) =
    10 GPU-s (20 GPU-s had its run been dated T); the round's own time stays T, and the dashboard's
    mean queueing delay (submit → first start) is 15 s."""
    t = timezone.now().replace(microsecond=0)
    early = make_job(tenant_a, "early", submitted_at=t - timedelta(seconds=30))
    late = make_job(tenant_a, "late", gpus=2, submitted_at=t + timedelta(seconds=5))
    starts = (core.Start(early.pk, (0,), 128, 1), core.Start(late.pk, (1, 2), 128, 1))
    record = round_now(django_capture_on_commit_callbacks, now=t, policy=FixedPolicy(starts=starts))
    assert record is not None and record.n_started == 2
    assert Round.objects.get(pk=record.pk).started_at == t
    assert run_dates(early) == ({t}, t, {t})
    at = t + timedelta(seconds=5)
    assert run_dates(late) == ({at}, at, {at})
    assert (early.started_at - early.submitted_at).total_seconds() == 30.0
    assert (late.started_at - late.submitted_at).total_seconds() == 0.0
    # the dashboard's mean queueing delay of team-a: (30 + 0) / 2 = 15 s (12.5 s with the −5 s)
    tenants, _ = tenant_jobs_and_bins(t - timedelta(hours=1), t + timedelta(seconds=10), 60.0)
    assert tenants[tenant_a.pk].avg_queue_s == pytest.approx(15.0, abs=1e-3)
    stop = FixedPolicy(preemptions=(core.Preempt(late.pk, "test"),))
    round_now(django_capture_on_commit_callbacks, now=t + timedelta(seconds=10), policy=stop)
    late.refresh_from_db()
    assert late.status == Job.Status.PENDING
    # the database computes the seconds (EpochSeconds: ms on SQLite, in floating point)
    assert late.attained_gpu_s == pytest.approx(10.0, abs=1e-3)
