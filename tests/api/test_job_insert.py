"""The single-statement insert's values (cluster/job_insert.py) are the ORM's, column by column:
its shortcut for values that preparation leaves unchanged must give what ``pre_save`` then
``get_db_prep_save`` gives, of the same type (on PostgreSQL an integer column's value is
psycopg's sized integer, whose type fixes the statement's parameter types)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import Model
from django.utils import timezone
from django.utils.functional import lazy
from psycopg.types.json import Jsonb

from cluster import job_insert
from cluster.models import Job, JobEvent, Tenant


def orm_values(instance: Model, plan: tuple[Any, ...]) -> list[Any]:
    """What the ORM's insert compiler prepares for the columns of ``plan``."""
    return [f.get_db_prep_save(f.pre_save(instance, True), connection) for f, *_ in plan]


def comparable(value: Any) -> Any:
    """``value``, or for psycopg's ``Jsonb`` wrapper (no ``==`` of its own) what it wraps."""
    return ("wrapped", value.obj) if isinstance(value, Jsonb) else value


def same(got: list[Any], want: list[Any]) -> None:
    assert [type(v) for v in got] == [type(v) for v in want]
    assert [comparable(v) for v in got] == [comparable(v) for v in want]


lazy_text = lazy(lambda: "lazy name", str)


@pytest.mark.parametrize(
    "fields",
    [
        {},  # the model's defaults: None, 0, "", the status
        {"iteration_time_s": 2, "measured_memory_mb": 512},  # ints in float columns: made floats
        {"iteration_time_s": 0.25, "gpu_memory_mb": 40_000, "priority": -3, "oom_retries": 2},
        {"batch_size": True, "name": lazy_text()},  # a bool in an integer column, a lazy string
        {"gpu_types": ["A100", "V100"], "idempotency_key": "k-1", "command": "python train.py"},
        {"iterations": 2**31 + 5, "finished_at": timezone.now()},  # beyond int4: the adapter decides
    ],
)
def test_job_values_are_the_orms(db: None, fields: dict[str, Any]) -> None:
    tenant = Tenant.objects.create(name="t")
    job = Job(tenant=tenant, name="j", model="resnet18", batch_size=64, gpus=1, iterations=100)
    for name, value in fields.items():
        setattr(job, name, value)
    plan = job_insert.insert_plan(Job)
    same(job_insert.prepared(job, plan), orm_values(job, plan))


def test_event_values_are_the_orms(db: None) -> None:
    tenant = Tenant.objects.create(name="t")
    job = Job.objects.create(tenant=tenant, name="j", model="resnet18", batch_size=64, gpus=1, iterations=9)
    event = JobEvent(job=job, kind="submitted", message="", data={"gpus": 1, "why": None})
    plan = job_insert.insert_plan(JobEvent, "job_id")
    assert "job_id" not in [f.attname for f, *_ in plan]
    same(job_insert.prepared(event, plan), orm_values(event, plan))


def test_plan_takes_every_insert_column(db: None) -> None:
    """The plan is the statement's columns in its order (the event's but ``job_id``)."""
    assert [f for f, *_ in job_insert.insert_plan(Job)] == job_insert.columns(Job)
    assert [f for f, *_ in job_insert.insert_plan(JobEvent, "job_id")] == [
        f for f in job_insert.columns(JobEvent) if f.attname != "job_id"
    ]
