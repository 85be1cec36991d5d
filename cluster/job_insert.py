"""A new job and its ``submitted`` event written by one SQL statement on PostgreSQL.

Why: a submission's two ORM ``create()`` calls in a transaction cost four round trips (BEGIN,
two INSERTs, COMMIT) and two compilations of an INSERT, about a third of the request's CPU
(issue 16). PostgreSQL runs a data-modifying ``WITH`` as one statement, atomic without a
transaction of its own:

    WITH j AS (INSERT INTO cluster_job (...) VALUES (...) RETURNING id)
    INSERT INTO cluster_jobevent (job_id, ...) SELECT j.id, ... FROM j RETURNING id, job_id

The statement's text is built once from the models' fields, and the values are prepared by each
field exactly as the ORM prepares them (``pre_save`` then ``get_db_prep_save``), so every column
and default stays the models'. Other databases (SQLite, the embedded default) keep the ORM's two
inserts in a transaction (:func:`supported` says which applies).
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Field, Model

from cluster.compiled import meta
from cluster.models import Job, JobEvent


def supported() -> bool:
    """Whether the default database runs the single statement (PostgreSQL)."""
    return connection.vendor == "postgresql"


def columns(model: type[Model]) -> list[Field]:
    """The fields ``model``'s INSERT writes: every concrete field but the primary key."""
    return [f for f in meta(model).concrete_fields if not f.primary_key]


@cache
def statement() -> str:
    """The SQL text (``%s`` placeholders: the job's columns, then the event's but ``job_id``)."""
    quote = connection.ops.quote_name
    job_fields = columns(Job)
    event_fields = columns(JobEvent)
    event_values = ["j.id" if f.attname == "job_id" else "%s" for f in event_fields]
    return (
        f"WITH j AS (INSERT INTO {quote(meta(Job).db_table)} "
        f"({', '.join(quote(f.column) for f in job_fields)}) "
        f"VALUES ({', '.join(['%s'] * len(job_fields))}) RETURNING {quote(meta(Job).pk.column)}) "
        f"INSERT INTO {quote(meta(JobEvent).db_table)} ({', '.join(quote(f.column) for f in event_fields)}) "
        f"SELECT {', '.join(event_values)} FROM j "
        f"RETURNING {quote(meta(JobEvent).pk.column)}, {quote(meta(JobEvent).get_field('job').column)}"
    )


def prepared(instance: Model, fields: list[Field]) -> list[Any]:
    """The database values of ``instance``'s ``fields`` for an INSERT, as the ORM's insert
    compiler makes them."""
    return [f.get_db_prep_save(f.pre_save(instance, True), connection) for f in fields]


def insert_submitted(job: Job, event: JobEvent) -> None:
    """Insert the unsaved ``job`` and its unsaved ``event`` (whose ``job`` is ``job``) in one
    statement and set their primary keys, as ``create()`` does. Raises ``django.db.IntegrityError`` as
    ``create()`` would (a repeated idempotency key); inside a transaction a savepoint keeps the
    transaction usable then, as ``transaction.atomic()`` around the two creates did."""
    params = prepared(job, columns(Job)) + prepared(
        event, [f for f in columns(JobEvent) if f.attname != "job_id"]
    )
    guard = transaction.atomic() if connection.in_atomic_block else nullcontext()
    with guard, connection.cursor() as cursor:
        cursor.execute(statement(), params)
        event.pk, job.pk = cursor.fetchone()
    event.job = job  # the cached relation, with its id now
    for row in (job, event):
        row._state.adding = False
        row._state.db = connection.alias
