"""Rows read and written by plain statements (:mod:`cluster.plain_rows`) are the rows the ORM
reads and writes, and an agent's items of a job's life no longer compile queries
(docs/PERFORMANCE.md §10, "Agent reports in plain statements").

The reference is the ORM itself: every concrete field of a row read both ways compares equal
and of the same type (booleans from SQLite's 0/1, moments aware, JSON decoded), an UPDATE writes
the named columns only, an INSERT stores what ``create()`` stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest
from django.db.models import Model
from django.db.models.sql.compiler import SQLCompiler

from cluster import plain_rows
from cluster.compiled import meta
from cluster.joblog_models import JobLogRun
from cluster.models import GPU, Job, JobEvent, Node, Placement, Tenant
from scheduling.models import JobIterTime, LearnedIterTime
from tests.service.test_agent_batch import placed
from tests.service.test_report_cost import BASE, send


def fields_of(row: Model) -> dict[str, Any]:
    return {f.attname: getattr(row, f.attname) for f in meta(type(row)).concrete_fields}


def same_as_orm(row: Model | None, model: type[Model], pk: Any) -> None:
    assert row is not None
    expected = fields_of(model._default_manager.get(pk=pk))
    assert fields_of(row) == expected
    assert {k: type(v) for k, v in fields_of(row).items()} == {k: type(v) for k, v in expected.items()}
    assert row._state.adding is False and row._state.db == "default"


def test_a_row_read_plainly_is_the_orms_row(fleet: dict, tenant: Tenant) -> None:
    job = Job.objects.create(tenant=tenant, name="j", model="resnet50", batch_size=64, iterations=10, gpus=1)
    event = JobEvent.objects.create(job=job, kind="started", data={"node": "node-00", "generation": 2})
    gpu = GPU.objects.filter(node=fleet["node-00"][0]).order_by("index").first()
    assert gpu is not None
    GPU.objects.filter(pk=gpu.pk).update(healthy=False)
    same_as_orm(plain_rows.get(Job, job.pk), Job, job.pk)
    same_as_orm(plain_rows.get(JobEvent, event.pk), JobEvent, event.pk)  # JSON decoded
    read = plain_rows.get(GPU, gpu.pk)
    same_as_orm(read, GPU, gpu.pk)
    assert read is not None and read.healthy is False  # not SQLite's 0
    assert plain_rows.get(Job, job.pk + 1000) is None
    assert plain_rows.get_by(JobLogRun, {"job": job.pk, "key": "node-00/g1"}) is None


def test_rows_by_fields_come_by_primary_key(fleet: dict) -> None:
    node = fleet["node-01"][0]
    rows = plain_rows.all_by(GPU, {"node": node})  # a foreign key takes the related row
    assert [g.pk for g in rows] == list(
        GPU.objects.filter(node=node).order_by("pk").values_list("pk", flat=True)
    )
    assert [g.index for g in rows] == [0, 1, 2, 3]
    assert plain_rows.get_by(Node, {"name": "node-01"}) == node


def test_a_plain_update_writes_the_named_columns_only(tenant: Tenant) -> None:
    job = Job.objects.create(tenant=tenant, name="j", model="resnet50", batch_size=64, iterations=10, gpus=1)
    job.iterations_done = 7.5
    job.measured_iteration_time_s = 0.25
    job.name = "not written"
    plain_rows.update(job, ["iterations_done", "measured_iteration_time_s"])
    stored = Job.objects.get(pk=job.pk)
    assert (stored.iterations_done, stored.measured_iteration_time_s, stored.name) == (7.5, 0.25, "j")


def test_a_plain_insert_stores_what_create_stores(tenant: Tenant) -> None:
    job = Job.objects.create(tenant=tenant, name="j", model="resnet50", batch_size=64, iterations=10, gpus=1)
    at = datetime(2026, 12, 2, 10, 0, 0, 123456, tzinfo=UTC)
    event = JobEvent(job=job, kind="progress", at=at, data={"iterations_done": 3.0, "note": "é"})
    plain_rows.insert(event)
    assert event.pk is not None
    same_as_orm(event, JobEvent, event.pk)
    assert JobEvent.objects.get(pk=event.pk).data == {"iterations_done": 3.0, "note": "é"}
    # a primary key given (one-to-one) is written, not left to the database
    own = JobIterTime(job=job, count=1, weight=1.0, mean_log=-1.5, var_log=0.0, updated_at=at)
    plain_rows.insert(own)
    assert own.pk == job.pk
    same_as_orm(own, JobIterTime, job.pk)
    run = JobLogRun(job=job, key="node-00/g1", node="node-00", received=4, eof=True, updated_at=at)
    plain_rows.insert(run)
    same_as_orm(run, JobLogRun, run.pk)


def test_rows_among_values_are_the_orms_filter_in(fleet: dict, tenant: Tenant) -> None:
    job = Job.objects.create(tenant=tenant, name="j", model="resnet50", batch_size=64, iterations=10, gpus=1)
    other = Job.objects.create(
        tenant=tenant, name="k", model="resnet50", batch_size=64, iterations=10, gpus=1
    )
    for j, key in ((job, "a"), (job, "b"), (other, "a"), (other, "c")):
        JobLogRun.objects.create(job=j, key=key, node="node-00", received=3, eof=key == "b")
    rows = plain_rows.all_in(JobLogRun, {"job": [job.pk, other], "key": ["a", "b"]})
    expected = JobLogRun.objects.filter(job__in=[job, other], key__in=["a", "b"]).order_by("pk")
    assert [r.pk for r in rows] == [r.pk for r in expected] and len(rows) == 3
    for row in rows:
        same_as_orm(row, JobLogRun, row.pk)
    assert plain_rows.all_in(JobLogRun, {"job": [job.pk], "key": []}) == []


def test_a_plain_multi_row_insert_and_update_are_bulk_create_and_bulk_update(
    tenant: Tenant, django_assert_num_queries: Callable
) -> None:
    job = Job.objects.create(tenant=tenant, name="j", model="resnet50", batch_size=64, iterations=10, gpus=1)
    at = datetime(2026, 12, 2, 10, 0, 0, 123456, tzinfo=UTC)
    runs = [
        JobLogRun(job=job, key=f"node-00/g{g}", node="node-00", received=g, eof=g == 2, updated_at=at)
        for g in range(1, 4)
    ]
    with django_assert_num_queries(1):
        plain_rows.insert_many(runs)
    for run in runs:  # each key set on its own instance: the rows read back by key are the instances
        same_as_orm(run, JobLogRun, run.pk)
    runs[0].received, runs[0].eof, runs[2].received = 40, True, 60
    runs[1].node = "not written"
    with django_assert_num_queries(1):
        plain_rows.update_many(runs, ["received", "eof"])
    stored = {r.key: (r.received, r.eof, r.node) for r in JobLogRun.objects.filter(job=job)}
    assert stored == {
        "node-00/g1": (40, True, "node-00"),
        "node-00/g2": (2, True, "node-00"),
        "node-00/g3": (60, False, "node-00"),
    }
    with django_assert_num_queries(0):
        plain_rows.insert_many([])
        plain_rows.update_many([], ["received"])


@pytest.fixture
def compilations() -> Iterator[list[str]]:
    """The SQL the ORM compiled while the test ran (``SQLCompiler.as_sql`` calls)."""
    seen: list[str] = []
    real = SQLCompiler.as_sql

    def counted(self: SQLCompiler, *args: Any, **kwargs: Any) -> Any:
        sql = real(self, *args, **kwargs)
        seen.append(sql[0])
        return sql

    with mock.patch.object(SQLCompiler, "as_sql", counted):
        yield seen


def test_a_jobs_reports_compile_no_query(
    fleet: dict,
    tenant: Tenant,
    sent: list,
    django_capture_on_commit_callbacks: Callable,
    compilations: list[str],
) -> None:
    """A 1-GPU job's first chunk and ``started``, a heartbeat listing it, its ``finished`` with an
    exclusive iteration time and its last chunk: every statement plain, none compiled by the ORM
    (before: 5 compilations for the chunk, 5 for the ``started``, ~10 for the ``finished``)."""
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)["node-00"]
    LearnedIterTime.objects.create(model="resnet50", batch_size=128, gpus=1)  # the class exists
    token = fleet["node-00"][1]
    job = jobs[0]
    run = "node-00/g1"
    compilations.clear()
    send(
        token,
        capture,
        logs=[{"job_id": job.pk, "run": run, "offset": 0, "data": "hello\n", "eof": False}],
        events=[{"job_id": job.pk, **BASE, "event": "started", "iterations_done": 0, "iter_time_s": None}],
    )
    heartbeat = {
        "gpus": [{"index": i, "uuid": "", "memory_mb": 16_000, "healthy": True} for i in range(4)],
        "running": [{"job_id": j.pk, "generation": 1, "iterations_done": 5} for j in jobs],
    }
    send(token, capture, heartbeat=heartbeat)
    send(
        token,
        capture,
        logs=[{"job_id": job.pk, "run": run, "offset": 6, "data": "bye\n", "eof": True}],
        events=[{"job_id": job.pk, **BASE, "event": "finished", "iterations_done": 1000, "iter_time_s": 0.2}],
    )
    assert compilations == []
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.iterations_done == 1000
    assert not Placement.objects.filter(job=job, active=True).exists()
    assert JobIterTime.objects.get(job=job).count == 1
    assert LearnedIterTime.objects.get(model="resnet50", batch_size=128, gpus=1).count == 1
    assert set(
        Job.objects.filter(pk__in=[j.pk for j in jobs[1:]]).values_list("iterations_done", flat=True)
    ) == {5}
