"""Many rows written at once: ``COPY … FROM STDIN`` on PostgreSQL, one ``executemany`` of a
plain INSERT on SQLite, ``bulk_create`` elsewhere.

A round writes hundreds of placements, events and agent orders; building a Django model
instance per row, then a multi-row INSERT, costs more than the database's work. On PostgreSQL
(psycopg 3) the rows go straight from tuples to ``COPY``, several times faster for a thousand
rows. On SQLite (the embedded demo, tests) each value is prepared by its field's own
``get_db_prep_save`` — what ``bulk_create`` does for it — and the rows go to the driver's
``executemany``: no model instance, no SQL compiled per call (``bulk_create`` was 5 % of the live
demo's CPU, docs/PERFORMANCE.md §10). Fields whose ``pre_save`` sets a value (``auto_now``,
``auto_now_add``) take the ORM's path everywhere.

The ``COPY`` is in PostgreSQL's binary format, each column typed by its field's database type
(:func:`copy_types`): psycopg then packs numbers, booleans and timestamps as bytes instead of
formatting each as text (a fill round's 1,569 placements: 5.3 → 1.7 ms of client CPU), and
the server reads the same values (``tests/service/test_bulk_insert.py`` compares every column
with what ``bulk_create`` writes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model


def quoted_table(model: type[Model]) -> str:
    """The quoted name of ``model``'s table, for hand-written SQL."""
    return str(connection.ops.quote_name(model._meta.db_table))


def quoted_column(model: type[Model], field: str) -> str:
    """The quoted column of ``model``'s field ``field`` (a foreign key's ``…_id``), for
    hand-written SQL. Raises ``FieldDoesNotExist`` for an unknown field."""
    return str(connection.ops.quote_name(model._meta.get_field(field).column))  # type: ignore[union-attr]


def insert_method() -> str:
    """How :func:`insert_values` writes on this connection: ``"copy"`` (PostgreSQL),
    ``"executemany"`` (SQLite) or ``"orm"`` (Django's ``bulk_create``: any other database; tests
    force it to compare the others with it)."""
    return {"postgresql": "copy", "sqlite": "executemany"}.get(connection.vendor, "orm")


def insert_values(model: type[Model], fields: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert one row of ``model`` per item of ``rows``, each giving the values of ``fields`` in
    order (model field names; a foreign key takes the related primary key; JSON fields a
    JSON-serialisable value; datetimes aware). Fields not named take their database default on
    PostgreSQL, their model default elsewhere: name every field without a database default.
    Primary keys are not read back. Returns the number of rows; raises the database's
    ``IntegrityError`` for a row that breaks a constraint (the caller's transaction is then
    unusable, as for any failed statement)."""
    rows = list(rows)
    if not rows:
        return 0
    columns = [model._meta.get_field(name) for name in fields]
    method = insert_method()
    if method == "executemany" and not any(_sets_on_save(f) for f in model._meta.concrete_fields):
        return _executemany(model, columns, rows)
    if method != "copy":
        attnames = [c.attname for c in columns]
        objects = [model(**dict(zip(attnames, row, strict=True))) for row in rows]
        model._default_manager.bulk_create(objects, batch_size=2000)
        return len(objects)
    quote = connection.ops.quote_name
    names = ", ".join(quote(c.column) for c in columns)  # type: ignore[union-attr]
    sql = f"COPY {quote(model._meta.db_table)} ({names}) FROM STDIN (FORMAT BINARY)"
    # Raw values: psycopg's dumper for each column's type adapts ints, floats, strings, aware
    # datetimes and JSON-serialisable values (a JSON column's dumper serialises them with
    # json.dumps, as the text COPY's Jsonb wrapper did); Django's per-field preparation would
    # cost more than the COPY.
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        copy.set_types(copy_types(model, fields))
        for row in rows:
            copy.write_row(row)
    return len(rows)


def _sets_on_save(field: Any) -> bool:
    """Whether the field's ``pre_save`` replaces the value given (a timestamp set on save)."""
    return bool(getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False))


def _executemany(model: type[Model], columns: list[Any], rows: list[Sequence[Any]]) -> int:
    """The rows inserted as ``bulk_create`` would insert them on SQLite: every concrete field but
    an auto primary key, the named ones from ``rows``, the others their model default (called per
    row, as a new instance calls it), each value prepared by ``get_db_prep_save``."""
    opts = model._meta
    named = {c.name: i for i, c in enumerate(columns)}
    targets = [f for f in opts.concrete_fields if f is not opts.auto_field]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(opts.db_table)} ({', '.join(quote(f.column) for f in targets)}) "
        f"VALUES ({', '.join(['%s'] * len(targets))})"
    )
    plan = [(f.get_db_prep_save, named.get(f.name), f.get_default) for f in targets]
    conn = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: read per value (cluster.plain_rows.wrapper)
    prepared = [
        [prep(row[i] if i is not None else default(), conn) for prep, i, default in plan] for row in rows
    ]
    with conn.cursor() as cursor:
        cursor.executemany(sql, prepared)
    return len(rows)


def copy_types(model: type[Model], fields: Sequence[str]) -> list[str]:
    """The PostgreSQL type names of ``model``'s ``fields`` (a foreign key: its target's key type),
    without modifiers (``varchar(16)`` → ``varchar``), as a binary ``COPY`` needs them declared.
    Raises ``FieldDoesNotExist`` for an unknown field; ``ValueError`` for a field without a
    column."""
    types = []
    for name in fields:
        db_type = model._meta.get_field(name).db_type(connection)  # type: ignore[union-attr]
        if not db_type:
            raise ValueError(f"{model.__name__}.{name} has no column")
        types.append(db_type.split("(", 1)[0].strip())
    return types


def insert_rows(model: type[Model], objects: Sequence[Model], fields: Sequence[str]) -> None:
    """Insert ``objects`` (unsaved model instances; their primary keys are not read back) setting
    ``fields`` (see :func:`insert_values`, which is faster where the rows are not already model
    instances)."""
    if not objects:
        return
    attnames = [model._meta.get_field(name).attname for name in fields]  # type: ignore[union-attr]
    insert_values(model, fields, ([getattr(obj, a) for a in attnames] for obj in objects))
