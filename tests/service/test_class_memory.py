"""The rows many jobs share in the learned profile, and their locks: a job class's learned memory
(``LearnedIterTime.memory_mb``, the largest peak per GPU reported at the full batch) kept by
:func:`scheduling.service.observations.observe_memory` — the largest value wins, and a report
that does not raise it neither writes nor waits for the class's row — and a class's iteration
time folded as the last statements of an event's transaction, so its row is locked only to the
commit (every event of a class's jobs folds into that one row).

The jobs run ResNet-18 at their full batch (sub-batch = global batch), so a report of ``m`` MB is
``m`` MB at the full batch (``m · mem(B) / mem(b)`` with ``b = B``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from cluster.models import Job, Node, Tenant
from scheduling import service
from scheduling.models import LearnedIterTime
from scheduling.service.generations import latest_generation
from scheduling.service.observations import observe_memory
from tests.conftest import skip_or_fail
from tests.service.learning_helpers import make_fleet, make_job, run_round

CLASS = {"model": "resnet18", "batch_size": 128, "gpus": 1}


def running_job(capture: Callable) -> Job:
    make_fleet()
    tenant = Tenant.create_with_owner("team-a", quota_gpus=8)[0]
    job = make_job(tenant, "a", iteration_time_s=0.2)
    run_round(capture)
    job.refresh_from_db()
    assert job.status == "running"
    return job


def class_memory() -> float | None:
    return LearnedIterTime.objects.get(**CLASS).memory_mb


def test_the_class_keeps_the_largest_memory_reported(
    db: None, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = running_job(django_capture_on_commit_callbacks)
    assert not LearnedIterTime.objects.filter(**CLASS).exists()
    observe_memory(job, 3000.0)  # the class's first report creates its row
    assert class_memory() == pytest.approx(3000.0)
    observe_memory(job, 2000.0)  # smaller: kept as it was
    assert class_memory() == pytest.approx(3000.0)
    observe_memory(job, 4500.0)  # larger: raised
    assert class_memory() == pytest.approx(4500.0)
    assert job.measured_memory_mb == pytest.approx(4500.0)
    # a class row that exists with samples but no memory yet (count > 0, memory None) takes it
    LearnedIterTime.objects.filter(**CLASS).update(memory_mb=None, count=3)
    observe_memory(job, 1000.0)
    row = LearnedIterTime.objects.get(**CLASS)
    assert (row.memory_mb, row.count) == (pytest.approx(1000.0), 3)


@pytest.mark.postgres
def test_a_report_that_does_not_raise_the_memory_waits_for_no_lock(
    transactional_db: None, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """Another transaction holds the class's row (as an event folding its first exclusive sample
    does until it commits); a report below the class's memory returns at once. It used to read
    the row ``FOR UPDATE`` and queue behind every such transaction (PERFORMANCE.md §10)."""
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...) for a second connection's row lock")
    job = running_job(django_capture_on_commit_callbacks)
    observe_memory(job, 3000.0)
    held, release = threading.Event(), threading.Event()

    def hold_the_class_row() -> None:
        try:
            with transaction.atomic():
                LearnedIterTime.objects.select_for_update().get(**CLASS)
                held.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_class_row)
    holder.start()
    try:
        assert held.wait(30)
        with transaction.atomic():
            with connection.cursor() as cursor:  # a wait for the lock fails the test in 2 s
                cursor.execute("SET LOCAL lock_timeout = '2s'")
            observe_memory(job, 2500.0)
        assert class_memory() == pytest.approx(3000.0)
    finally:
        release.set()
        holder.join(30)


def test_a_classs_iteration_time_is_folded_last_in_the_event(
    db: None, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """The job's first exclusive report (a ``started`` event with its iteration time): the class's
    row is read (``FOR UPDATE`` on PostgreSQL) and written after every other statement of the
    event — the job's own sample, its progress and its event row — and it holds the sample."""
    job = running_job(django_capture_on_commit_callbacks)
    node = Node.objects.get(pk=job.placements.get(active=True).gpu.node_id)
    event = service.AgentEvent(latest_generation(job.pk), "started", 0.0, iter_time_s=0.25)
    with CaptureQueriesContext(connection) as queries:
        service.record_event(node, job.pk, event)
    sql = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    touching = [i for i, text in enumerate(sql) if "scheduling_learneditertime" in text]
    assert touching and touching == list(range(len(sql) - len(touching), len(sql)))
    assert any("INSERT" in text and "cluster_jobevent" in text for text in sql[: touching[0]])
    row = LearnedIterTime.objects.get(**CLASS)
    assert (row.count, row.stats.mean) == (1, pytest.approx(0.25))  # sub-batch = batch: t(B) = t
