"""Database expressions the service and the dashboard compute in SQL rather than in Python.

Parsing thousands of timestamps into ``datetime`` objects one by one costs more than the rest of a
snapshot or dashboard query (on SQLite Django parses each with a regular expression), so these
turn columns into plain numbers inside the database, the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import F, FloatField, Func, Lookup, Value
from django.db.models.functions import Greatest


class EpochSeconds(Func):
    """A timestamp column as POSIX seconds (float): µs precision on PostgreSQL, ms on SQLite."""

    output_field = FloatField()
    template = "EXTRACT(EPOCH FROM %(expressions)s)"

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # Django stores UTC text; julianday() of the Unix epoch is 2440587.5
        return self.as_sql(
            compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)", **extra
        )

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        # date_part, not EXTRACT: since PostgreSQL 14 EXTRACT computes in numeric (about twice the
        # cost of a 10,000-job aggregate); date_part divides the µs count in float8, the same
        # correctly rounded value as EXTRACT(...)::float8
        return self.as_sql(compiler, connection, template="date_part('epoch', %(expressions)s)", **extra)


class BinIndex(Func):
    """``floor(x)``, for a bin number. SQLite has no native FLOOR (Django's is a Python function
    called per row), so there a cast to integer, which truncates: the same for ``x ≥ 0``, and
    the callers clamp negative bins to 0 anyway."""

    output_field = FloatField()
    function = "FLOOR"

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, template="CAST(%(expressions)s AS INTEGER)", **extra)


class AnyOf(Lookup):  # type: ignore[type-arg]
    """``column IN (values)`` for a long list of plain values (ints, strings), as
    ``Job.objects.filter(AnyOf(F("pk"), ids))``: on PostgreSQL ``column = ANY(%s)`` with the list
    as one array parameter. Django's ``__in`` prepares every value and writes one placeholder each;
    for the 386 jobs a fill round starts a query took 3.8 ms of client CPU, 1.2 ms with the
    array. A list of plain ints goes as one text literal cast to ``bigint[]``: psycopg adapts a
    list element by element (4.5 ms of client CPU for 10,000 ids, 0.9 ms as the literal; the
    snapshot asks its 10,000 pending jobs' samples so). Elsewhere (SQLite) the plain ``IN`` list.
    An empty list matches nothing (the query still runs: skip it when there is nothing to ask)."""

    lookup_name = "any_of"
    prepare_rhs = False

    def __init__(self, lhs: Any, rhs: Sequence[Any]) -> None:
        super().__init__(lhs, list(rhs))

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, params = self.process_lhs(compiler, connection)
        if connection.vendor == "postgresql":
            if all(type(v) is int for v in self.rhs):  # not bool, nor an int subclass's own text
                return f"{lhs} = ANY(%s::bigint[])", [*params, "{" + ",".join(map(str, self.rhs)) + "}"]
            return f"{lhs} = ANY(%s)", [*params, self.rhs]
        return f"{lhs} IN ({', '.join(['%s'] * len(self.rhs))})", [*params, *self.rhs]


def run_end(now: datetime) -> Greatest:
    """The ``ended_at`` to write when placements end at ``now``: never before the row's own
    ``created_at``. The round that wrote a placement and the event that ends it may run in
    processes whose clocks differ by a little; an interval that ends before it begins would hold
    negative GPU time (and broke the dashboard's sweep over a shared GPU)."""
    return Greatest(F("created_at"), Value(now))
