"""``cluster.compiled.compiled_at``: the SQL compiled once and run with other moments is the SQL
and parameters the ORM writes for those moments (the dashboard's spans queries and a plain
filter, several moments each, equal moments included), on SQLite and PostgreSQL; a moment the
query does not take as a parameter of its own is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cluster import compiled
from cluster.models import Job
from scheduling.service import closed_runs, gpu_hours

T0 = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _finished_between(lo: datetime, hi: datetime) -> Any:
    return Job.objects.filter(finished_at__gt=lo, finished_at__lte=hi, submitted_at__lt=hi).values_list("id")


def _folded(moment: datetime) -> Any:
    return Job.objects.filter(status="pending").values_list("id")  # the moment is not used


@pytest.mark.django_db
@pytest.mark.parametrize(
    "build",
    [_finished_between, gpu_hours.pending_spans_query, closed_runs.later_query],
    ids=["filter", "pending spans", "later"],
)
def test_compiled_once_equals_compiled_each_time(build: Any) -> None:
    arity = build.__code__.co_argcount
    compiled.forget()  # from a clean process
    for k in range(4):
        # distinct moments, then all equal (the kept cutoff equal to the new one)
        moments = [T0 + timedelta(seconds=k * 37.5 + j * (0 if k == 3 else 61)) for j in range(arity)]
        want = build(*moments).query.sql_with_params()
        assert compiled.compiled_at(build, *moments) == (want[0], tuple(want[1]))


@pytest.mark.django_db
def test_a_moment_not_among_the_parameters_is_refused() -> None:
    with pytest.raises(ValueError, match="not a parameter"):
        compiled.compiled_at(_folded, T0)
