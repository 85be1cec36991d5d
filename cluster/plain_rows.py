"""A model's row read, inserted or updated by a plain statement written once per process.

Why: an agent's report applies each of its items with a handful of one-row statements (lock the
job, insert an event, update two columns), and the ORM compiles every one of them afresh — a
``select_for_update().filter(pk=…).first()`` cost 0.48 ms of CPU where running the same SQL
took 0.09 ms (docs/PERFORMANCE.md §10, "Agent reports in plain statements"). The statements
here are written from the model's own table, columns and field conversions (``_meta``, each
field's ``get_db_prep_save`` and ``pre_save``, the backend's and the field's converters), so a
row read or written here is the row the ORM would have read or written; what they skip is the
compilation and, for writes, the model signals (:func:`update` and :func:`insert` say so, and
must not be used for a model whose saves someone listens to).

Units: none (rows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

from cluster.compiled import meta

M = TypeVar("M", bound=Model)
#: A converter as the SQL compiler calls it: ``(value, expression, connection) → value``.
Converter = Callable[[Any, Any, Any], Any]


@cache
def _conversions(
    fields: tuple[Field | None, ...], vendor: str
) -> tuple[tuple[tuple[Converter, ...], Any], ...]:
    """Per column: the converters the SQL compiler would apply to a column of that field (the
    backend's, then the field's; none for ``None``), and the column expression they are given."""
    out = []
    for f in fields:
        if f is None:
            out.append(((), None))
            continue
        column = f.get_col(meta(f.model).db_table)
        converters = connection.ops.get_db_converters(column) + f.get_db_converters(connection)
        out.append((tuple(converters), column))
    return tuple(out)


def wrapper() -> BaseDatabaseWrapper:
    """This thread's connection itself, for code that touches it per value: each attribute read
    through ``django.db.connection`` (a proxy) looks the connection up in a thread- and
    context-local store, 2.5–4.5 µs here against 0.16 µs on the wrapper (docs/PERFORMANCE.md
    §10), and a row's preparation or conversion reads it once per column."""
    return connections[DEFAULT_DB_ALIAS]


def converted(
    row: Sequence[Any], fields: tuple[Field | None, ...], conn: BaseDatabaseWrapper | None = None
) -> list[Any]:
    """``row``'s values as the ORM gives them for columns of ``fields`` (``None``: as the cursor
    gave it): booleans from SQLite's 0/1, JSON decoded, and so on; ``conn``: the connection (by
    default :func:`wrapper`)."""
    conn = conn or wrapper()
    values = []
    for value, (converters, column) in zip(row, _conversions(fields, conn.vendor), strict=True):
        for convert in converters:
            value = convert(value, column, conn)
        values.append(value)
    return values


def marks(count: int) -> str:
    """``count`` placeholders for an ``IN (…)`` list: ``"%s, %s, %s"``."""
    return ", ".join(["%s"] * count)


def run(sql: str, params: Sequence[Any]) -> int:
    """Run the plain statement ``sql`` (an UPDATE, say) with ``params``; the rows it touched."""
    with wrapper().cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def select(sql: str, params: Sequence[Any], fields: tuple[Field | None, ...]) -> list[list[Any]]:
    """The rows of ``sql`` (a plain statement, ``%s`` placeholders) run with ``params``, each
    :func:`converted` for its columns' ``fields``."""
    conn = wrapper()
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    return [converted(row, fields, conn) for row in found]


@cache
def _reader(
    model: type[Model], vendor: str, keys: tuple[str, ...], lock: bool
) -> tuple[str, list[str], tuple[Field, ...]]:
    """``(SQL, attnames, fields)`` of a read of the rows whose fields ``keys`` equal the
    parameters, by primary key (``FOR UPDATE`` when ``lock`` and the backend has it: SQLite locks
    the whole database on write and ignores ``select_for_update``, as the ORM does)."""
    opts = meta(model)
    q = connection.ops.quote_name
    fields = tuple(opts.concrete_fields)
    where = " AND ".join(f"{q(opts.get_field(k).column)} = %s" for k in keys)
    sql = (
        f"SELECT {', '.join(q(f.column) for f in fields)} FROM {q(opts.db_table)} WHERE {where} "
        f"ORDER BY {q(opts.pk.column)}"
    )
    if lock and connection.features.has_select_for_update:
        sql += " FOR UPDATE"
    return sql, [f.attname for f in fields], fields


def get(model: type[M], pk: Any, lock: bool = False) -> M | None:
    """The row of ``model`` whose primary key is ``pk`` as a model instance (every concrete field
    loaded, converted as the ORM converts it), or ``None`` when there is none; ``lock``: ``SELECT
    … FOR UPDATE`` (must then run inside a transaction, as ``select_for_update`` must)."""
    return get_by(model, {meta(model).pk.name: pk}, lock)


def get_by(model: type[M], equal: dict[str, Any], lock: bool = False) -> M | None:
    """The first row, by primary key, of :func:`all_by` (``.filter(**equal).order_by("pk")
    .first()``: the model's own ``Meta.ordering`` is not applied, so use it on a unique key), or
    ``None`` when there is none."""
    found = all_by(model, equal, lock)
    return found[0] if found else None


def all_by(model: type[M], equal: dict[str, Any], lock: bool = False) -> list[M]:
    """The rows of ``model`` whose fields equal ``equal`` (field name → value, e.g. ``{"job": 7,
    "key": "n1/g2"}``), by primary key, as model instances (every concrete field loaded, converted
    as the ORM converts it): ``.filter(**equal).order_by("pk")``. The values are prepared by each
    field's ``get_db_prep_value`` (a foreign key takes the related row or its primary key); ``lock``:
    ``SELECT … FOR UPDATE`` (inside a transaction, as ``select_for_update``)."""
    opts, conn = meta(model), wrapper()
    sql, names, fields = _reader(model, conn.vendor, tuple(equal), lock)
    params = [
        opts.get_field(k).get_db_prep_value(v.pk if isinstance(v, Model) else v, conn)
        for k, v in equal.items()
    ]
    return [model.from_db(conn.alias, names, row) for row in select(sql, params, fields)]


@cache
def _updater(model: type[Model], vendor: str, names: tuple[str, ...]) -> tuple[str, list[Field]]:
    """``(SQL, fields)`` of an UPDATE of the columns ``names`` of one row by primary key."""
    opts = meta(model)
    q = connection.ops.quote_name
    fields = [opts.get_field(name) for name in names]
    sets = ", ".join(f"{q(f.column)} = %s" for f in fields)
    return f"UPDATE {q(opts.db_table)} SET {sets} WHERE {q(opts.pk.column)} = %s", fields


def update(instance: Model, fields: Sequence[str]) -> None:
    """``instance.save(update_fields=fields)`` as one UPDATE of those columns by primary key, each
    value prepared as the ORM prepares it (``pre_save``, then ``get_db_prep_save``). Sends no
    ``pre_save``/``post_save`` signal. Raises ``django.core.exceptions.FieldDoesNotExist`` for a
    name that is not a field of the model."""
    conn = wrapper()
    sql, prepared = _updater(type(instance), conn.vendor, tuple(fields))
    params = [f.get_db_prep_save(f.pre_save(instance, False), conn) for f in prepared]
    params.append(instance.pk)
    run(sql, params)


@cache
def _inserter(model: type[Model], vendor: str, with_key: bool) -> tuple[str, list[Field], bool]:
    """``(SQL, fields, returning)`` of an INSERT of every concrete field (but an auto primary key
    when ``with_key`` is false, as the ORM leaves it to the database); ``returning``: the
    statement returns the new key (else the cursor's ``lastrowid`` has it)."""
    opts = meta(model)
    q = connection.ops.quote_name
    generated = not with_key and opts.auto_field is not None
    fields = [f for f in opts.concrete_fields if not (generated and f is opts.auto_field)]
    returning = generated and connection.features.can_return_columns_from_insert
    sql = (
        f"INSERT INTO {q(opts.db_table)} ({', '.join(q(f.column) for f in fields)}) "
        f"VALUES ({', '.join(['%s'] * len(fields))})"
    )
    if returning:
        sql += f" RETURNING {q(opts.pk.column)}"
    return sql, fields, returning


def insert(instance: Model) -> None:
    """``instance.save(force_insert=True)`` of a new row as one INSERT of every concrete field
    (an auto primary key left to the database and set on the instance, as ``save()`` does; a key
    given, e.g. a one-to-one primary key, written), each value prepared as the ORM's insert
    prepares it; marks the instance saved. Sends no ``pre_save``/``post_save`` signal and skips
    the model's own ``save`` (e.g. :class:`~cluster.models.JobEvent`'s append-only guard, which
    an INSERT cannot break). Raises ``django.db.IntegrityError`` as ``save()`` would."""
    opts, conn = meta(type(instance)), wrapper()
    generated = opts.auto_field is not None and instance.pk is None
    sql, fields, returning = _inserter(type(instance), conn.vendor, not generated)
    params = [f.get_db_prep_save(f.pre_save(instance, True), conn) for f in fields]
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        if generated:
            instance.pk = cursor.fetchone()[0] if returning else cursor.lastrowid
    instance._state.adding = False
    instance._state.db = conn.alias


@cache
def _in_reader(
    model: type[Model], vendor: str, counts: tuple[tuple[str, int], ...]
) -> tuple[str, list[str], tuple[Field, ...]]:
    """``(SQL, attnames, fields)`` of a read of the rows whose field ``name`` is one of ``count``
    parameters, for each ``(name, count)`` of ``counts``, by primary key."""
    opts = meta(model)
    q = connection.ops.quote_name
    fields = tuple(opts.concrete_fields)
    where = " AND ".join(f"{q(opts.get_field(k).column)} IN ({marks(n)})" for k, n in counts)
    sql = (
        f"SELECT {', '.join(q(f.column) for f in fields)} FROM {q(opts.db_table)} WHERE {where} "
        f"ORDER BY {q(opts.pk.column)}"
    )
    return sql, [f.attname for f in fields], fields


def all_in(model: type[M], among: dict[str, Sequence[Any]]) -> list[M]:
    """The rows of ``model`` whose field ``name`` is one of ``values``, for every ``name: values``
    of ``among`` (e.g. ``{"job": [7, 9], "key": ["n1/g2"]}``), by primary key, as model instances
    (as :func:`all_by`): ``.filter(job__in=…, key__in=…).order_by("pk")``; no value for a field:
    no row, and no statement."""
    if not all(among.values()):
        return []
    opts, conn = meta(model), wrapper()
    sql, names, fields = _in_reader(model, conn.vendor, tuple((k, len(v)) for k, v in among.items()))
    params = [
        opts.get_field(k).get_db_prep_value(v.pk if isinstance(v, Model) else v, conn)
        for k, values in among.items()
        for v in values
    ]
    return [model.from_db(conn.alias, names, row) for row in select(sql, params, fields)]


@cache
def _many_inserter(model: type[Model], vendor: str, with_key: bool, rows: int) -> str:
    """The SQL of one INSERT of ``rows`` rows, each of the columns of :func:`_inserter`'s (with the
    new keys returned where that one returns them)."""
    opts = meta(model)
    q = connection.ops.quote_name
    _, fields, returning = _inserter(model, vendor, with_key)
    row = f"({', '.join(['%s'] * len(fields))})"
    sql = (
        f"INSERT INTO {q(opts.db_table)} ({', '.join(q(f.column) for f in fields)}) "
        f"VALUES {', '.join([row] * rows)}"
    )
    if returning:
        sql += f" RETURNING {q(opts.pk.column)}"
    return sql


def insert_many(instances: Sequence[Model]) -> None:
    """:func:`insert` of new rows of one model, all with or all without their primary key, as
    few multi-row INSERTs (as many rows in each as the backend takes parameters:
    ``bulk_batch_size``): ``bulk_create(instances)``, the new auto keys set on the instances in
    the order the database returns them, as ``bulk_create`` sets them. Where the backend cannot
    return the keys of a multi-row insert (SQLite before 3.35), one :func:`insert` per row. No
    signal, no model ``save``; nothing for no instance."""
    if not instances:
        return
    model, conn = type(instances[0]), wrapper()
    opts = meta(model)
    generated = opts.auto_field is not None and instances[0].pk is None
    _, fields, returning = _inserter(model, conn.vendor, not generated)
    if generated and not (returning and conn.features.can_return_rows_from_bulk_insert):
        for instance in instances:
            insert(instance)
        return
    size = max(1, conn.ops.bulk_batch_size(fields, instances))
    for start in range(0, len(instances), size):
        batch = instances[start : start + size]
        sql = _many_inserter(model, conn.vendor, not generated, len(batch))
        params = [f.get_db_prep_save(f.pre_save(i, True), conn) for i in batch for f in fields]
        with conn.cursor() as cursor:
            cursor.execute(sql, params)
            if generated:
                for instance, key in zip(batch, cursor.fetchall(), strict=True):
                    instance.pk = key[0]
        for instance in batch:
            instance._state.adding = False
            instance._state.db = conn.alias


@cache
def _many_updater(
    model: type[Model], vendor: str, names: tuple[str, ...], rows: int
) -> tuple[str, list[Field]]:
    """``(SQL, fields)`` of one UPDATE of the columns ``names`` of ``rows`` rows by primary key,
    each column a ``CASE`` on the key (cast to the column's type where the backend needs it, as
    ``bulk_update`` casts)."""
    opts = meta(model)
    q = connection.ops.quote_name
    fields = [opts.get_field(name) for name in names]
    key = q(opts.pk.column)
    cases = " ".join(["WHEN %s THEN %s"] * rows)
    sets = []
    for f in fields:
        case = f"CASE {key} {cases} END"
        if connection.features.requires_casted_case_in_updates:
            case = f"CAST({case} AS {f.db_type(connection)})"
        sets.append(f"{q(f.column)} = {case}")
    return f"UPDATE {q(opts.db_table)} SET {', '.join(sets)} WHERE {key} IN ({marks(rows)})", fields


def update_many(instances: Sequence[Model], fields: Sequence[str]) -> None:
    """:func:`update` of several rows of one model in one UPDATE (``bulk_update(instances,
    fields)``; more than the backend's parameters allow in one: in as few as fit): the columns
    ``fields`` of each row by primary key, each value prepared as the ORM prepares it. No
    signal; nothing for no instance."""
    if not instances:
        return
    conn = wrapper()
    limit = conn.features.max_query_params
    size = len(instances) if limit is None else max(1, limit // (2 * len(fields) + 1))
    for start in range(0, len(instances), size):
        batch = instances[start : start + size]
        sql, prepared = _many_updater(type(batch[0]), conn.vendor, tuple(fields), len(batch))
        params: list[Any] = []
        for f in prepared:
            for i in batch:
                params += [i.pk, f.get_db_prep_save(f.pre_save(i, False), conn)]
        params += [i.pk for i in batch]
        run(sql, params)
