"""A query's SQL compiled once per process, then run with other moments as its parameters.

Compiling a queryset with subqueries, ``Case`` and annotations costs the ORM milliseconds of CPU
on every call (the quota panel's two spans queries: ~7 ms of CPU per poll on a loaded 2-core
machine, more than the database took to run them), yet its SQL text does not depend on the values of its
datetime parameters. :func:`compiled_at` builds the query once with sentinel moments, notes
where their values stand among the parameters, and on every later call puts the given moments
there.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Model
from django.db.models.options import Options

#: Moments no query of the service is given: 1970-01-02, -03, … (one per moment of a query).
_SENTINEL_DAY = datetime(1970, 1, 2, tzinfo=UTC)

# (builder, vendor) → (SQL, parameters, {parameter index: moment index})
_kept: dict[tuple[Callable[..., Any], str], tuple[str, tuple[Any, ...], dict[int, int]]] = {}


def compiled_at(build: Callable[..., Any], *moments: datetime) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters of ``build(*moments)`` (a queryset; its SQL may depend on how many
    moments there are, never on their values), compiled once per process and database vendor.

    Raises ``ValueError`` when a moment given to ``build`` does not appear as a parameter of its
    own (e.g. folded into the SQL text), where the kept SQL could not take another one."""
    key = (build, connection.vendor)
    kept = _kept.get(key)
    if kept is None:
        sentinels = [_SENTINEL_DAY + timedelta(days=k) for k in range(len(moments))]
        sql, params = build(*sentinels).query.sql_with_params()
        adapted = {_adapted(s): k for k, s in enumerate(sentinels)}
        where = {i: adapted[p] for i, p in enumerate(params) if _hashable(p) and p in adapted}
        if set(where.values()) != set(range(len(moments))):
            raise ValueError(f"{build.__qualname__}: a moment is not a parameter of its own")
        kept = _kept[key] = (sql, tuple(params), where)
    sql, params, where = kept
    values = [_adapted(m) for m in moments]
    return sql, tuple(values[where[i]] if i in where else p for i, p in enumerate(params))


def kept_rows(build: Callable[..., Any], *moments: datetime) -> list[tuple]:
    """The rows of ``build(*moments)``, a ``values_list`` queryset whose SQL depends on nothing
    but the values of ``moments`` (:func:`compiled_at`: compiled once per process), as the
    cursor gives them (plain numbers and strings, no ORM converters: booleans are 0/1 and
    moments strings on SQLite). For the reads of every dashboard poll (the tenants, quota rows,
    GPUs, active placements, the placements open at a cutoff), which cost the ORM more CPU to
    compile and convert than the database took to answer. The SQL is kept, never the rows.
    ``build`` must be a module-level function (it is the kept SQL's key)."""
    sql, params = compiled_at(build, *moments)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def meta(model: type[Model]) -> Options:
    """``model._meta``: Django's documented Model ``_meta`` API (public despite its underscore),
    for the plain statements written from a model's table and column names."""
    return model._meta


def forget() -> None:
    """Drop every kept SQL (they depend on no data; for a test that wants a fresh process)."""
    _kept.clear()


def _adapted(moment: datetime) -> Any:
    """``moment`` as the backend's ``DateTimeField`` passes it (a string on SQLite)."""
    return connection.ops.adapt_datetimefield_value(moment)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
