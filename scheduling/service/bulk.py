"""Many rows written at once: ``COPY … FROM STDIN`` on PostgreSQL, ``bulk_create`` elsewhere.

A round writes hundreds of placements, events and agent orders; building a Django model
instance per row, then a multi-row INSERT, costs more than the database's work. On PostgreSQL
(psycopg 3) the rows go straight from tuples to ``COPY``, several times faster for a thousand
rows; SQLite (tests, the embedded demo) keeps Django's ``bulk_create``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection
from django.db.models import Model


def quoted_table(model: type[Model]) -> str:
    """The quoted name of ``model``'s table, for hand-written SQL."""
    return str(connection.ops.quote_name(model._meta.db_table))


def quoted_column(model: type[Model], field: str) -> str:
    """The quoted column of ``model``'s field ``field`` (a foreign key's ``…_id``), for
    hand-written SQL. Raises ``FieldDoesNotExist`` for an unknown field."""
    return str(connection.ops.quote_name(model._meta.get_field(field).column))  # type: ignore[union-attr]


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
    if connection.vendor != "postgresql":
        attnames = [c.attname for c in columns]
        objects = [model(**dict(zip(attnames, row, strict=True))) for row in rows]
        model._default_manager.bulk_create(objects, batch_size=2000)
        return len(objects)
    from psycopg.types.json import Jsonb

    quote = connection.ops.quote_name
    names = ", ".join(quote(c.column) for c in columns)  # type: ignore[union-attr]
    sql = f"COPY {quote(model._meta.db_table)} ({names}) FROM STDIN"
    # Raw values: psycopg adapts ints, strings and aware datetimes itself, and Django's per-field
    # preparation would cost more than the COPY (only JSON needs wrapping).
    json_at = [i for i, c in enumerate(columns) if c.get_internal_type() == "JSONField"]
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:
            if json_at:
                row = list(row)
                for i in json_at:
                    row[i] = Jsonb(row[i])
            copy.write_row(row)
    return len(rows)


def insert_rows(model: type[Model], objects: Sequence[Model], fields: Sequence[str]) -> None:
    """Insert ``objects`` (unsaved model instances; their primary keys are not read back) setting
    ``fields`` (see :func:`insert_values`, which is faster where the rows are not already model
    instances)."""
    if not objects:
        return
    attnames = [model._meta.get_field(name).attname for name in fields]  # type: ignore[union-attr]
    insert_values(model, fields, ([getattr(obj, a) for a in attnames] for obj in objects))
