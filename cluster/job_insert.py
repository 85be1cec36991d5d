"""A new job and its ``submitted`` event written by one SQL statement on PostgreSQL.

Why: a submission's two ORM ``create()`` calls in a transaction cost four round trips (BEGIN,
two INSERTs, COMMIT) and two compilations of an INSERT, about a third of the request's CPU
(issue 16). PostgreSQL runs a data-modifying ``WITH`` as one statement, atomic without a
transaction of its own:

    WITH j AS (INSERT INTO cluster_job (...) VALUES (...) RETURNING id)
    INSERT INTO cluster_jobevent (job_id, ...) SELECT j.id, ... FROM j RETURNING id, job_id

The statement's text is built once from the models' fields, and the values are prepared by each
field exactly as the ORM prepares them (``pre_save`` then ``get_db_prep_save``), so every column
and default stays the models'; a value that preparation provably leaves as it is (or, for an
integer column, only hands to the backend's adapter) skips the layers of calls that would find
so (:func:`prepared`). Other databases (SQLite, the embedded default) keep the ORM's two
inserts in a transaction (:func:`supported` says which applies).
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.models import (
    BigIntegerField,
    CharField,
    Field,
    FloatField,
    IntegerField,
    Model,
    PositiveBigIntegerField,
    PositiveIntegerField,
    PositiveSmallIntegerField,
    SmallIntegerField,
    TextField,
)

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


#: Django's own field classes (exactly these, not subclasses, which may override a step) whose
#: ``get_db_prep_save`` returns a value of this type, or ``None``, unchanged: ``Field``'s
#: ``get_prep_value`` only resolves lazy strings, ``CharField``/``TextField``'s ``to_python``
#: keeps a ``str``, ``FloatField``'s ``float()`` keeps a ``float`` (Django 5.2,
#: ``django/db/models/fields/__init__.py``).
UNCHANGED: dict[type[Field], type] = {CharField: str, TextField: str, FloatField: float}
#: ... and those that turn an ``int`` into ``int(value)``, the same, then hand it to
#: ``connection.ops.adapt_integerfield_value`` (on PostgreSQL, psycopg's sized integer types).
INTEGER_FIELDS = (
    IntegerField,
    SmallIntegerField,
    BigIntegerField,
    PositiveIntegerField,
    PositiveSmallIntegerField,
    PositiveBigIntegerField,
)


#: One column of an INSERT: its field, the value type its preparation leaves unchanged (``int``:
#: only adapted; ``None``: none, always prepared) and its internal type.
Column = tuple[Field, type | None, str]


@cache
def insert_plan(model: type[Model], without: str = "") -> tuple[Column, ...]:
    """The :data:`Column` of each field ``model``'s INSERT writes (:func:`columns`) but the one
    whose ``attname`` is ``without``, in order; built once per process."""
    plan = []
    for f in columns(model):
        if f.attname == without:
            continue
        kind = type(f)
        unchanged = int if kind in INTEGER_FIELDS else UNCHANGED.get(kind)
        plan.append((f, unchanged, f.get_internal_type()))
    return tuple(plan)


def prepared(instance: Model, plan: tuple[Column, ...]) -> list[Any]:
    """The database values of ``instance``'s columns of ``plan`` (:func:`insert_plan` of its
    model) for an INSERT, as the ORM's insert compiler makes them: ``pre_save`` then
    ``get_db_prep_save``, except that a value of a type that preparation leaves unchanged
    (:data:`UNCHANGED`; ``None`` for those fields) is taken as it is, and an ``int`` of an
    :data:`INTEGER_FIELDS` field is only adapted (``connection.ops.adapt_integerfield_value``):
    the same values in about half the time (40 → 23 µs a job row).
    ``tests/api/test_job_insert.py`` compares both ways column by column."""
    adapt = connection.ops.adapt_integerfield_value
    values: list[Any] = []
    for f, unchanged, internal in plan:
        value = f.pre_save(instance, True)
        if value is None and unchanged is not None:
            values.append(None)
        elif type(value) is unchanged:  # never for None: every other field is prepared
            values.append(adapt(value, internal) if unchanged is int else value)
        else:
            values.append(f.get_db_prep_save(value, connection))
    return values


def insert_submitted(job: Job, event: JobEvent) -> None:
    """Insert the unsaved ``job`` and its unsaved ``event`` (whose ``job`` is ``job``) in one
    statement and set their primary keys, as ``create()`` does. Raises ``django.db.IntegrityError`` as
    ``create()`` would (a repeated idempotency key); inside a transaction a savepoint keeps the
    transaction usable then, as ``transaction.atomic()`` around the two creates did."""
    params = prepared(job, insert_plan(Job)) + prepared(event, insert_plan(JobEvent, "job_id"))
    guard = transaction.atomic() if connection.in_atomic_block else nullcontext()
    with guard, connection.cursor() as cursor:
        cursor.execute(statement(), params)
        event.pk, job.pk = cursor.fetchone()
    event.job = job  # the cached relation, with its id now
    for row in (job, event):
        row._state.adding = False
        row._state.db = connection.alias
