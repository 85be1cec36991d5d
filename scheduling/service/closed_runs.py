"""The spans of work each tenant had in a window (who had work for at least half of it: the
windowed fairness, docs/FAIRNESS.md §4), with the finished jobs of the closed past merged once
and kept (docs/PERFORMANCE.md, "Dashboard", fifth pass).

What is closed: a job that finished at or before the *cutoff* ``W`` (a multiple of
:data:`GRID_S` at least :data:`MARGIN_S` before now, as the cached charge takes it,
:mod:`scheduling.service.closed_charge`) and was submitted no later than it finished. Its span
(submitted → finished) cannot change unless the row does, so the closed spans are kept merged
per tenant into maximal runs (:data:`~scheduling.service.gpu_hours.RUNS_SQL`, the database's
sort of the day's finished jobs done once) from a *floor* ``L`` (≤ the window's start) to ``W``.

A union does not care about duplicates or about spans that end before the window (every span is
clipped to the window, then merged: :func:`~scheduling.core.usage.active_tenants_over`), so the
kept runs, plus the spans of jobs finished after ``W`` (read on every request), plus the waiting
jobs' spans give each tenant exactly the union, hence the covered lengths, of the computation
from scratch (the same floats: runs are ``MIN``/``MAX`` of the spans' ends).

Invalidation: every request reads, in the one statement that also reads the spans after ``W``,
the count, the sum of ids and the sum of tenant ids of the jobs finished in ``(L, W]`` (closed as
above) and compares them with the entry's: a job inserted into or deleted from the closed past
(a late commit, a deleted tenant), or one moved into or out of it, makes them differ and the
entry is rebuilt. An edit of a finished job's ``submitted_at`` that keeps its id, tenant and
finish in the range is not seen (neither is a ``created_at`` edit by the cached charge). When the
cutoff moves on, the spans finished in the old cutoff's step are merged into the kept runs (read
by the same statement, so the new fingerprint is the old one plus theirs). The floor is moved up
by a rebuild once it lags the window's start by :data:`FLOOR_SLACK_S`.

Cache: this process's own copy only (each process checks it against the database on every
request; a rebuild is one sort of the window's finished jobs), one entry per window length in
steps of the cutoff, a few at most (``closed_charge.KEPT_ENTRIES``). Entries are never changed once
kept (threads of one process share them): a new one replaces the old. Units: seconds (s).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import Case, F, IntegerField, Q, QuerySet, Value, When

from cluster.compiled import compiled_at
from cluster.expressions import EpochSeconds
from cluster.models import Job
from scheduling.service.closed_charge import GRID_S, MARGIN_S, keep
from scheduling.service.gpu_hours import RUNS_SQL, pending_span_sql

#: How far the floor may lag the window's start (s) before the entry is rebuilt: bounds the rows
#: the fingerprint counts (a day's window reads at most an hour more).
FLOOR_SLACK_S = 3600.0

Span = tuple[str, float, float]


@dataclass(frozen=True, slots=True)
class RunsEntry:
    """The closed past of one window length: floor ``floor_s`` (L) and cutoff ``cutoff_s`` (W), s;
    ``runs``: ``(tenant id as text, begin s, end s)``, each tenant's closed spans merged;
    ``fingerprint``: (jobs, sum of ids, sum of tenant ids) of the closed jobs finished in
    ``(L, W]``."""

    floor_s: float
    cutoff_s: float
    runs: tuple[Span, ...]
    fingerprint: tuple[int, int, int]


# longest window's length in steps (_key) → this process's entry (at most KEPT_ENTRIES)
_local: dict[int, RunsEntry] = {}


def job_spans(lo_s: float, hi_s: float, *, use_cache: bool = True) -> list[Span]:
    """Spans ``(tenant id as text, begin s, end s)`` whose union per tenant, clipped to
    ``[lo_s, hi_s]`` (POSIX s), is the time some job of the tenant was pending or running in it:
    what :func:`~scheduling.service.gpu_hours.job_spans_afresh` gives, with the finished jobs of the
    closed past as kept runs (module docstring). Spans may repeat or end before ``lo_s``.
    One query when the cutoff did not move or moved on, 2 more for a rebuild."""
    cutoff = math.floor((hi_s - MARGIN_S) / GRID_S) * GRID_S
    key = _key(hi_s - lo_s)
    entry = _local.get(key) if use_cache else None
    if entry is not None and not (entry.floor_s <= lo_s <= entry.floor_s + FLOOR_SLACK_S):
        entry = None  # the window's start left the floor's range
    if entry is not None and entry.cutoff_s > cutoff:
        entry = None  # another thread's clock ahead, or a window ending earlier
    if entry is None:
        entry = _built(math.floor(lo_s / GRID_S) * GRID_S, cutoff)
    waiting, later, fingerprint = _read(lo_s, hi_s, entry)
    if fingerprint != entry.fingerprint:
        entry = _built(math.floor(lo_s / GRID_S) * GRID_S, entry.cutoff_s)
    if entry.cutoff_s < cutoff:
        entry = _advanced(entry, cutoff, later)
    if use_cache:
        keep(_local, key, entry)
    return waiting + list(entry.runs) + [(t, b, e) for t, _, b, e, _ in later]


def kept(window_s: float) -> RunsEntry | None:
    """This process's entry for windows of ``window_s`` s (``None``: none kept), to inspect."""
    return _local.get(_key(window_s))


def _key(window_s: float) -> int:
    """The key of a window's entry: its length in steps of the cutoff (:data:`GRID_S`). Not the
    exact length: a window that begins where a replay of a trace began
    (``frontend.payloads.clock.TimeScale.window_start``) is longer on every request, and would be
    a new entry — a rebuild — each time. Any entry is correct for any window it is checked
    against (its floor at or before the window's start, its cutoff not ahead, its fingerprint);
    the key only keeps windows of other lengths from taking each other's entry away."""
    return math.ceil(window_s / GRID_S)


def forget() -> None:
    """Drop this process's entries: for tests that start a fresh database whose ids may repeat."""
    _local.clear()


def _at(seconds: float) -> str:
    return connection.ops.adapt_datetimefield_value(datetime.fromtimestamp(seconds, tz=UTC))


def _closed_q(floor_s: float, cutoff_s: float) -> Q:
    return Q(
        finished_at__gt=datetime.fromtimestamp(floor_s, tz=UTC),
        finished_at__lte=datetime.fromtimestamp(cutoff_s, tz=UTC),
        submitted_at__lte=F("finished_at"),
    )


# Job's table (Django's default name); written out: an aggregate the ORM would compile per call
_FINGERPRINT_SQL = (
    "SELECT COUNT(id), CAST(COALESCE(SUM(id), 0) AS BIGINT), CAST(COALESCE(SUM(tenant_id), 0) AS BIGINT) "
    "FROM cluster_job WHERE finished_at > %s AND finished_at <= %s AND submitted_at <= finished_at"
)


def _built(floor_s: float, cutoff_s: float) -> RunsEntry:
    """A new entry: the fingerprint read first, then the runs (a job committed in between is in
    the runs but not the fingerprint: the next request rebuilds, it never misses a span)."""
    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL, [_at(floor_s), _at(cutoff_s)])
        count, ids, tenants = (int(v) for v in cursor.fetchone())
        spans = (
            Job.objects.filter(_closed_q(floor_s, cutoff_s))
            .order_by()
            .annotate(begin_s=EpochSeconds("submitted_at"), end_s=EpochSeconds("finished_at"))
            .values_list("tenant_id", "begin_s", "end_s")
        )
        sql, params = spans.query.sql_with_params()
        cursor.execute(RUNS_SQL.format(spans=sql), params)
        runs = tuple((str(t), b, e) for t, b, e in cursor.fetchall())
    return RunsEntry(floor_s, cutoff_s, runs, (count, ids, tenants))


def _read(
    lo_s: float, hi_s: float, entry: RunsEntry
) -> tuple[list[Span], list[tuple[str, int, float, float, int]], tuple[int, int, int]]:
    """One statement: the waiting jobs' spans (one per tenant, from its earliest submission);
    the finished jobs not in ``entry``'s closed past as ``(tenant, id, begin, end, closed)``,
    ``closed`` 1 for those closed at the cutoff of ``hi_s`` (to advance the entry); and the
    fingerprint of ``entry``'s range ``(L, W]``."""
    hi = datetime.fromtimestamp(hi_s, tz=UTC)
    cutoff = math.floor((hi_s - MARGIN_S) / GRID_S) * GRID_S
    waiting_sql, waiting_params = pending_span_sql(hi)
    kept_cutoff, new_cutoff = (datetime.fromtimestamp(s, tz=UTC) for s in (entry.cutoff_s, cutoff))
    later_sql, later_params = compiled_at(later_query, hi, kept_cutoff, new_cutoff)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 0, tenant_id, NULL, begin_s, NULL, NULL FROM ({waiting_sql}) waiting "
            f"UNION ALL SELECT 1, * FROM ({later_sql}) later "
            f"UNION ALL SELECT 2, fp.* , NULL, NULL FROM ({_FINGERPRINT_SQL}) fp",
            (*waiting_params, *later_params, _at(entry.floor_s), _at(entry.cutoff_s)),
        )
        rows = cursor.fetchall()
    waiting_spans = [(str(t), b, hi_s) for kind, t, _, b, _, _ in rows if kind == 0 and b is not None]
    later_rows = [(str(t), i, b, e, c) for kind, t, i, b, e, c in rows if kind == 1]
    fp = next((int(t), int(i), int(b)) for kind, t, i, b, _, _ in rows if kind == 2)
    return waiting_spans, later_rows, fp


def later_query(hi: datetime, kept_cutoff: datetime, cutoff: datetime) -> QuerySet[Job, tuple[Any, ...]]:
    """The jobs submitted before ``hi`` finished after ``kept_cutoff`` (the entry's cutoff W;
    a few, by the index on ``finished_at``) as ``(tenant, id, begin s, end s, closed)``, closed
    1 for those closed at ``cutoff`` (the cutoff of ``hi``: to advance the entry). A job that
    finished before it was submitted is in neither part: its span ends before it begins, so it
    covers nothing (clipped away by ``active_tenants_over``; from scratch it never widens a run of
    ``RUNS_SQL`` either, its end being before its begin). Compiled once per process
    (:func:`cluster.compiled.compiled_at`)."""
    return (
        Job.objects.filter(submitted_at__lt=hi, finished_at__gt=kept_cutoff)
        .order_by()
        .annotate(
            begin_s=EpochSeconds("submitted_at"),
            end_s=EpochSeconds("finished_at"),
            closed=Case(
                When(
                    finished_at__gt=kept_cutoff,
                    finished_at__lte=cutoff,
                    submitted_at__lte=F("finished_at"),
                    then=Value(1),
                ),
                default=Value(0),
                output_field=IntegerField(),
            ),
        )
        .values_list("tenant_id", "id", "begin_s", "end_s", "closed")
    )


def _advanced(
    old: RunsEntry, cutoff_s: float, later: Iterable[tuple[str, int, float, float, int]]
) -> RunsEntry:
    """``old`` moved on to ``cutoff_s``: the spans closed in ``(old cutoff, cutoff_s]`` (read in the
    statement that checked ``old``'s fingerprint) merged into its runs, their ids added to it."""
    closed = [(t, i, b, e) for t, i, b, e, c in later if c]
    count, ids, tenants = old.fingerprint
    fingerprint = (
        count + len(closed),
        ids + sum(i for _, i, _, _ in closed),
        tenants + sum(int(t) for t, *_ in closed),
    )
    per_tenant: dict[str, list[tuple[float, float]]] = {}
    for t, b, e in old.runs:
        per_tenant.setdefault(t, []).append((b, e))
    for t, _, b, e in closed:
        per_tenant.setdefault(t, []).append((b, e))
    runs: list[Span] = []
    for t, parts in per_tenant.items():
        merged: list[tuple[float, float]] = []
        for b, e in sorted(parts):
            if merged and b <= merged[-1][1]:  # touching spans join, as RUNS_SQL joins them
                merged[-1] = (merged[-1][0], max(merged[-1][1], e))
            else:
                merged.append((b, e))
        runs += [(t, b, e) for b, e in merged]
    return RunsEntry(old.floor_s, cutoff_s, tuple(runs), fingerprint)
