"""Attained GPU service (``Job.attained_gpu_s``, GPU-s) across preemptions and requeues: the stored
service of ended runs, the current run's service in the snapshot, and Tiresias (2D-LAS) ranking
on it. The cluster fixture: node-00 (core GPUs 0–3) and node-01 (4–7), four V100s each.

Every instant is explicit (``now=``), on whole seconds from a fixed ``T0``, so the values below
are exact on SQLite (ms timestamps) and PostgreSQL (µs).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction
from django.test import override_settings

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.core.policies.tiresias import QUEUE_THRESHOLD_GPU_S
from tests.service.test_rounds import FixedPolicy, make_job, round_now

T0 = datetime(2026, 1, 5, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """``T0 + seconds``."""
    return T0 + timedelta(seconds=seconds)


def start(capture: Callable, job: Job, gpu_ids: tuple[int, ...], seconds: float) -> None:
    """A round at ``T0 + seconds`` that starts ``job`` on core GPUs ``gpu_ids`` (batch 128 whole)."""
    decision = core.Start(job.pk, gpu_ids, job.batch_size, 1)
    record = round_now(capture, now=at(seconds), policy=FixedPolicy(starts=(decision,)))
    assert record is not None and record.n_started == 1


def preempt(capture: Callable, job: Job, seconds: float) -> None:
    """A round at ``T0 + seconds`` that preempts ``job``."""
    decision = core.Preempt(job.pk, "test")
    record = round_now(capture, now=at(seconds), policy=FixedPolicy(preemptions=(decision,)))
    assert record is not None and record.n_preempted == 1


def snapshot_job(seconds: float, job: Job) -> core.Job:
    """``job`` as the snapshot at ``T0 + seconds`` sees it (pending or running)."""
    return service.load_state(at(seconds)).jobs[job.pk]


def stored(job: Job) -> float:
    return Job.objects.values_list("attained_gpu_s", flat=True).get(pk=job.pk)


def test_service_of_a_preempted_run_is_kept_and_the_next_run_adds_to_it(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = make_job(tenant_a, "twice", gpus=2, iteration_time_s=0.1, submitted_at=at(-60))
    start(capture, job, (0, 1), 0)
    # running since T0: 2 GPUs × 100 s = 200 GPU-s, none of it stored yet
    assert snapshot_job(100, job).attained_gpu_s == pytest.approx(200.0)
    assert stored(job) == 0.0
    preempt(capture, job, 100)
    # the preemption stores the run: 0 + 2 × (100 − 0) = 200 GPU-s; pending, it stays 200
    assert stored(job) == pytest.approx(200.0)
    pending = snapshot_job(120, job)
    assert pending.attained_gpu_s == pytest.approx(200.0)
    assert pending.queued_since == pytest.approx(at(100).timestamp())
    start(capture, job, (4, 5), 130)
    job.refresh_from_db()
    assert job.started_at == at(0)  # the first start ever: not the current run's
    # second run from T0+130: 200 + 2 × (180 − 130) = 300 GPU-s (not 2 × 180 = 360 from started_at)
    (running,) = service.load_state(at(180)).snapshot.running
    assert running.job.id == job.pk and running.placement.start_time == pytest.approx(at(130).timestamp())
    assert running.job.attained_gpu_s == pytest.approx(300.0)
    preempt(capture, job, 180)
    assert stored(job) == pytest.approx(300.0)
    assert snapshot_job(200, job).attained_gpu_s == pytest.approx(300.0)


def test_a_preemption_adds_only_the_preempted_jobs_run(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    victim = make_job(tenant_a, "victim", gpus=1, iteration_time_s=0.1, submitted_at=at(-60))
    other = make_job(tenant_a, "other", gpus=4, iteration_time_s=0.1, submitted_at=at(-60))
    start(capture, victim, (0,), 10)
    start(capture, other, (4, 5, 6, 7), 20)
    preempt(capture, victim, 70)
    # victim: 1 GPU × (70 − 10) s = 60 GPU-s; the other job keeps running and stores nothing
    assert stored(victim) == pytest.approx(60.0)
    assert stored(other) == 0.0
    # other, still running at T0+70: 4 × (70 − 20) = 200 GPU-s in the snapshot
    assert snapshot_job(70, other).attained_gpu_s == pytest.approx(200.0)


def test_heartbeat_timeout_requeue_adds_the_run(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    node0 = cluster[0]
    job = make_job(
        tenant_a, "silent", gpus=2, iteration_time_s=0.1, submitted_at=at(-60), attained_gpu_s=200.0
    )  # 200 GPU-s from an earlier run
    start(capture, job, (0, 1), 0)
    assert snapshot_job(30, job).attained_gpu_s == pytest.approx(200.0 + 2 * 30)
    Node.objects.filter(pk=node0.pk).update(last_heartbeat=at(20))
    Node.objects.exclude(pk=node0.pk).update(last_heartbeat=at(40))  # the others' agents go on
    with override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=15.0), capture(execute=True):
        # silent 40 − 20 = 20 s > 15 s: requeued at T0+40
        assert service.check_heartbeats(at(40)) == {"node-00": [job.pk]}
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING
    assert JobEvent.objects.filter(job=job, kind=JobEvent.Kind.REQUEUED).count() == 1
    # 200 + 2 GPUs × (40 − 0) s = 280 GPU-s, stored; the pending job's snapshot shows it
    assert job.attained_gpu_s == pytest.approx(280.0)
    assert snapshot_job(60, job).attained_gpu_s == pytest.approx(280.0)


def test_agent_stopped_event_requeue_adds_the_run_but_a_finish_does_not(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    node0 = cluster[0]
    job = make_job(tenant_a, "stopped", gpus=1, iteration_time_s=0.1, submitted_at=at(-60))
    start(capture, job, (2,), 5)
    with capture(execute=True):
        answer = service.record_event(
            node0, job.pk, service.AgentEvent(1, "stopped", 40, reason="shutdown"), now=at(50)
        )
    assert answer["status"] == Job.Status.PENDING
    # 1 GPU × (50 − 5) s = 45 GPU-s; progress is kept beside it
    job.refresh_from_db()
    assert job.attained_gpu_s == pytest.approx(45.0) and job.iterations_done == 40
    # runs again from T0+60 and finishes: a finished run does not go back to the queue, so the
    # stored service stays that of the requeued runs (45 GPU-s)
    start(capture, job, (3,), 60)
    generation = Placement.objects.filter(job=job, active=True).get().generation
    with capture(execute=True):
        service.record_event(node0, job.pk, service.AgentEvent(generation, "finished", 1000), now=at(90))
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.attained_gpu_s == pytest.approx(45.0)


def test_tiresias_demotes_a_job_by_its_stored_service(
    cluster: list[Node], tenant_c: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    # team-c: 2 GPUs guaranteed, no borrow limit, so an 8-GPU gang is allowed
    old = make_job(tenant_c, "old", gpus=8, iteration_time_s=0.1, submitted_at=at(-10))
    start(capture, old, tuple(range(8)), 0)
    preempt(capture, old, 500)
    # 8 GPUs × 500 s = 4,000 GPU-s ≥ the 3,200 GPU-s threshold: low queue. Executed time
    # 4,000 / 8 = 500 s; at T0+600 it has waited 600 − 500 = 100 s ≤ 500 s: not starving.
    assert stored(old) == pytest.approx(4000.0) and stored(old) >= QUEUE_THRESHOLD_GPU_S
    fresh = make_job(tenant_c, "fresh", gpus=8, iteration_time_s=0.1, submitted_at=at(510))
    # Both need the whole cluster. Tiresias ranks the fresh job (0 GPU-s, high queue) first,
    # although the old one was submitted earlier (FIFO would break a tie in its favour).
    record = round_now(capture, now=at(600), policy="tiresias")
    assert record is not None and record.n_started == 1
    assert Job.objects.get(pk=fresh.pk).status == Job.Status.RUNNING
    assert Job.objects.get(pk=old.pk).status == Job.Status.PENDING
    assert {d["job_id"]: d["action"] for d in record.decision_list()} == {fresh.pk: "start", old.pk: "wait"}


def test_attained_service_is_never_negative(tenant_a: Tenant) -> None:
    job = make_job(tenant_a, "neg")
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(attained_gpu_s=-1.0)


def test_a_run_starting_after_now_adds_nothing(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = make_job(
        tenant_a, "skewed", gpus=2, iteration_time_s=0.1, submitted_at=at(-60), attained_gpu_s=100.0
    )
    start(capture, job, (0, 1), 100)
    # a clock behind the placement's creation (skew): max(0, 90 − 100) = 0 s counted, no negative
    assert snapshot_job(90, job).attained_gpu_s == pytest.approx(100.0)
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(attained_gpu_s=service.attained_after_run(at(90)))
    assert stored(job) == pytest.approx(100.0)
