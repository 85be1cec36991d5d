"""The timeline's placements of a window: read from scratch (one sorted, cut join) or from rows
kept per process, the ended ones of the closed past read once (docs/PERFORMANCE.md §6, sixth
pass).

What is kept, per window length polled: every placement row that ended in ``(L, W]`` (*closed*:
``W`` the cached charge's cutoff, a multiple of :data:`GRID_S` at least :data:`MARGIN_S` before
now; ``L`` the *floor*, ≤ the window's start, on the same grid), joined once to its GPU, job and
tenant and sorted as the timeline orders them (latest end first, then latest begin, then highest
id); and the rest (*open*: still held, or ended after ``W``), joined too. What a row shows (GPU,
slot, job, begin, end) cannot change but by the row changing; a tenant's name can (an admin
renames it), so names are read on every request, with the fingerprints.

Invalidation: every request runs one statement that gives, for the rows ended after ``L`` or
still held, the count and the sum of ids of the closed ones, and the count, the sum of ids, the
ended ones' count and sum of ids of the open ones, and the tenants' names. A closed part that
differs (a row committed late into the past, a node, job or tenant deleted with its rows) is
read again; so is an open part that differs (a placement starts, ends, or is deleted): its
ids and ends only, the rows not kept joined. The fingerprint is read before the rows it
describes: a change in between makes the next request read them again, never the reverse.
When the cutoff moves on, the open rows ended by the new cutoff move to the closed part and the
rows ended by the new floor are dropped, their counts and ids moved with them, so a request
checks the moved entry with the same statement. Not seen, as by the cached charge: an edit of
``created_at``, or of an ``ended_at`` that stays on the same side of the cutoff, that keeps the
row's id.

Order and window: compared in exact µs (the database's order), the JSON's times the database's
epoch seconds, clipped as :func:`placements_afresh` clips them, so both give the same bytes.

Cache: this process's own copy only (each request checks it against the database). Entries are
never changed once kept (threads of one process share them): a new one replaces the old.
Units: seconds since the epoch (s).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Greatest, Least

from cluster.expressions import AnyOf, EpochSeconds
from cluster.models import Placement
from common.shapes import gpu_label
from frontend.payloads.common import placements_in_window, raw_rows
from frontend.payloads.service import CLOSED_GRID_S as GRID_S
from frontend.payloads.service import CLOSED_MARGIN_S as MARGIN_S

#: A kept row: (id, GPU label, slot, job id, job name, tenant id, begin s, end s | None, begin
#: µs, end µs | None). The seconds are the database's epoch seconds, as the JSON shows them; the
#: µs are exact, to order and compare as the database does (SQLite's epoch seconds come from
#: ``julianday`` and may be off by tens of µs: a placement ended at now may seem to end before).
Row = tuple[Any, ...]
#: A row of the window as the timeline draws it: (GPU label, slot, job id, job name, tenant id,
#: tenant name, begin s, end s), begin and end clipped to the window.
Placed = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class KeptRows:
    """The rows kept for one window length: floor ``floor_s`` (L) and cutoff ``cutoff_s`` (W), s.

    ``closed``: rows ended in ``(L, W]``, latest end first, then latest begin, then highest id;
    ``fingerprint``: (rows, sum of ids) of them, as the database gave it before they were read.
    ``open``: rows still held or ended after ``W`` (any order); ``open_fingerprint``: (rows, sum
    of ids, ended rows, sum of their ids). ``neg_ends``: minus each closed row's end (ascending,
    to bisect; µs); ``ties``: the positions ``i`` whose closed row ends when row ``i + 1`` does."""

    floor_s: float
    cutoff_s: float
    closed: tuple[Row, ...]
    fingerprint: tuple[int, int]
    open: tuple[Row, ...]
    open_fingerprint: tuple[int, int, int, int]
    neg_ends: tuple[int, ...]
    ties: tuple[int, ...]


# window length polled (s) → this process's entry
_local: dict[float, KeptRows] = {}


def order_key(lo: float, hi: float, begin_at: int, end_at: int) -> Callable[[Row], tuple[float, float, int]]:
    """The timeline's order of rows whose first field is the id and fields ``begin_at`` and
    ``end_at`` their begin and end (end ``None`` while held; ``lo`` and ``hi``, the window, in
    their unit), sorted with ``reverse=True``: latest end clipped to ``hi`` first, then latest
    begin clipped to ``lo``, then highest id."""
    return lambda r: (
        hi if r[end_at] is None or r[end_at] > hi else r[end_at],
        r[begin_at] if r[begin_at] > lo else lo,
        r[0],
    )


def placements_afresh(
    start: datetime, now: datetime, tenant_id: int | None = None, limit: int | None = None
) -> tuple[list[Placed], int]:
    """Placements that held a GPU during ``[start, now]`` as :data:`Placed` rows, times clipped
    to the window (``end`` is now for an active placement), in :func:`order_key`'s order; at
    most ``limit`` of them (the database sorts and cuts), and how many there are in all. With
    ``tenant_id``: only on GPUs that a job of that tenant held in the window (with the other
    jobs on those GPUs). Everything read from the database (the reference of :func:`placements`)."""
    placements = placements_in_window(start, now)
    if tenant_id is not None:
        placements = placements.filter(
            gpu_id__in=placements_in_window(start, now).filter(job__tenant_id=tenant_id).values("gpu_id")
        )
    begin, end = Greatest("created_at", Value(start)), Coalesce(Least("ended_at", Value(now)), Value(now))
    order = (end.desc(), begin.desc(), "-id")
    chosen, sort_here = placements.order_by(*order), False
    if limit is not None:
        # the database sorts and cuts the narrow placement rows alone, then joins only those
        # kept to their jobs, GPUs, nodes and tenants: one statement, no ids sent back and forth
        chosen = Placement.objects.filter(pk__in=chosen.values("pk")[:limit])
        # PostgreSQL's epoch seconds are exact (µs), so Python can put the 2,000 joined rows back
        # in that order for less than the database sorting them again; SQLite's are to the ms
        sort_here = connection.vendor == "postgresql"
        if not sort_here:
            chosen = chosen.order_by(*order)
    rows = raw_rows(
        chosen.annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at")).values_list(
            "id",
            "gpu__node__name",
            "gpu__index",
            "slot",
            "job_id",
            "job__name",
            "job__tenant_id",
            "job__tenant__name",
            "begin_s",
            "end_s",
        )
    )
    lo, hi = start.timestamp(), now.timestamp()
    if sort_here:
        rows.sort(key=order_key(lo, hi, 8, 9), reverse=True)
    labels: dict[tuple[str, int], str] = {}
    out = []
    for _, node, index, slot, job_id, name, tenant, tenant_name, b, e in rows:
        gpu = labels.get((node, index))
        if gpu is None:
            gpu = labels[(node, index)] = gpu_label(node, index)
        out.append(
            (
                gpu,
                slot,
                job_id,
                name,
                tenant,
                tenant_name,
                b if b > lo else lo,
                hi if e is None or e > hi else e,
            )
        )
    # counted apart only when cut (a window count in the query costs more than this)
    return out, placements.count() if limit is not None and len(out) == limit else len(out)


def placements(
    start: datetime, now: datetime, window_s: float, tenant_id: int | None = None, limit: int | None = None
) -> tuple[list[Placed], int]:
    """What :func:`placements_afresh` gives (the same rows, values and order), from this
    process's kept rows for windows of ``window_s`` s (module docstring): one query while the
    rows did not change or the cutoff moved on, a join of the changed part when they did."""
    lo, hi = start.timestamp(), now.timestamp()
    lo_us, hi_us = _us(start), _us(now)
    entry, names = kept_rows(lo, hi, window_s)
    fresh = [r for r in entry.open if r[8] < hi_us and (r[9] is None or r[9] > lo_us)]
    n = bisect_left(entry.neg_ends, -lo_us)  # the closed rows ending after the window's start
    closed: Sequence[Row] = _clipped_order(entry, n, lo_us)
    if closed and max(r[8] for r in closed) >= hi_us:  # an odd row begun after it ended, and after now
        closed = [r for r in closed if r[8] < hi_us]
    if tenant_id is not None:
        gpus = {r[1] for r in fresh if r[5] == tenant_id} | {r[1] for r in closed if r[5] == tenant_id}
        fresh = [r for r in fresh if r[1] in gpus]
        closed = [r for r in closed if r[1] in gpus]
    fresh.sort(key=order_key(lo_us, hi_us, 8, 9), reverse=True)
    total = len(fresh) + len(closed)
    # every open row ends after the cutoff, every closed one by it: the open rows come first
    chosen = fresh + list(closed[: max(0, (total if limit is None else limit) - len(fresh))])
    if limit is not None:
        chosen = chosen[:limit]
    out = [
        (
            gpu,
            slot,
            job,
            name,
            tenant,
            names.get(tenant),
            b if b > lo else lo,
            hi if e is None or e > hi else e,
        )
        for _, gpu, slot, job, name, tenant, b, e, _, _ in chosen
    ]
    return out, total


def _clipped_order(entry: KeptRows, n: int, lo_us: int) -> Sequence[Row]:
    """The first ``n`` closed rows of ``entry`` in :func:`order_key`'s order for a window from
    ``lo_us``: kept in it but for rows of one end begun by the window's start, which clipped to
    it tie on their begin and go by id (a run of such rows sits together, after the rows of that
    end begun later): only those runs are sorted again."""
    closed = entry.closed
    runs = [i for i in entry.ties if i + 1 < n and closed[i][8] <= lo_us and closed[i + 1][8] <= lo_us]
    if not runs:
        return closed[:n]
    out = list(closed[:n])
    first = last = runs[0]
    for i in [*runs[1:], None]:
        if i is not None and i == last + 1:
            last = i
            continue
        out[first : last + 2] = sorted(out[first : last + 2], key=lambda r: r[0], reverse=True)
        if i is not None:
            first = last = i
    return out


def kept_rows(lo_s: float, hi_s: float, window_s: float) -> tuple[KeptRows, dict[int, str]]:
    """This process's entry for windows of ``window_s`` s, checked against the database (and
    moved on, or read again where it differs) for the window ``[lo_s, hi_s]``, and every
    tenant's name by id. One query when nothing changed or the cutoff moved on; one more for
    each part that changed."""
    cutoff = math.floor((hi_s - MARGIN_S) / GRID_S) * GRID_S
    floor = min(math.floor(lo_s / GRID_S) * GRID_S, cutoff)
    entry = _local.get(window_s)
    if entry is not None and (entry.floor_s > lo_s or entry.cutoff_s > cutoff):
        entry = None  # the window begins before the kept floor, or another thread's clock is ahead
    if entry is not None and (entry.floor_s < floor or entry.cutoff_s < cutoff):
        entry = _moved_on(entry, floor, cutoff)
    if entry is None:
        entry = _entry(floor, cutoff, (), (-1, -1), (), (-1, -1, -1, -1))  # fingerprints no count matches
    closed_fp, open_fp, names = _fingerprints(entry.floor_s, entry.cutoff_s)
    if closed_fp != entry.fingerprint:
        closed = _sorted(_rows(Q(ended_at__gt=_at(entry.floor_s), ended_at__lte=_at(entry.cutoff_s))))
        entry = _entry(entry.floor_s, entry.cutoff_s, closed, closed_fp, entry.open, entry.open_fingerprint)
    if open_fp != entry.open_fingerprint:
        # a new entry, the closed part's rows and their ends shared (never changed once kept)
        entry = replace(entry, open=_open_rows(entry.open, entry.cutoff_s), open_fingerprint=open_fp)
    _local[window_s] = entry
    return entry, names


def kept(window_s: float) -> KeptRows | None:
    """This process's entry for windows of ``window_s`` s (``None``: none kept), to inspect."""
    return _local.get(window_s)


def forget() -> None:
    """Drop this process's entries: for tests that start a fresh database whose ids may repeat."""
    _local.clear()


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _us(moment: datetime) -> int:
    """``moment`` (aware) as exact µs since the epoch."""
    return (moment - _EPOCH) // _MICROSECOND


def _us_of_column(value: datetime | str | None) -> int | None:
    """A timestamp column as SQLite's driver gives it (a naive UTC datetime, or its text), as
    exact µs since the epoch."""
    if value is None:
        return None
    moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return _us(moment if moment.tzinfo else moment.replace(tzinfo=UTC))


def _entry(
    floor_s: float,
    cutoff_s: float,
    closed: tuple[Row, ...],
    fingerprint: tuple[int, int],
    opened: tuple[Row, ...],
    open_fingerprint: tuple[int, int, int, int],
) -> KeptRows:
    ends = tuple(-r[9] for r in closed)
    ties = tuple(i for i in range(len(ends) - 1) if ends[i] == ends[i + 1])
    return KeptRows(floor_s, cutoff_s, closed, fingerprint, opened, open_fingerprint, ends, ties)


def _sorted(rows: Iterable[Row]) -> tuple[Row, ...]:
    """Closed rows in the timeline's order (unclipped: latest end, latest begin, highest id)."""
    return tuple(sorted(rows, key=lambda r: (r[9], r[8], r[0]), reverse=True))


def _moved_on(old: KeptRows, floor_s: float, cutoff_s: float) -> KeptRows:
    """``old`` moved to the floor ``floor_s`` and the cutoff ``cutoff_s`` (neither earlier than
    ``old``'s): closed rows ended by the new floor dropped, open rows ended by the new cutoff made
    closed, the counts and ids of both fingerprints moved with them (the caller checks the
    result against the database, as any entry)."""
    floor_us, cutoff_us = _us(_at(floor_s)), _us(_at(cutoff_s))
    keep = bisect_left(old.neg_ends, -floor_us)  # the closed rows ending after the new floor
    dropped = old.closed[keep:]
    moved = [r for r in old.open if r[9] is not None and r[9] <= cutoff_us]
    arrived = [r for r in moved if r[9] > floor_us]
    closed = _sorted(arrived) + old.closed[:keep]
    count, ids = old.fingerprint
    fingerprint = (
        count - len(dropped) + len(arrived),
        ids - sum(r[0] for r in dropped) + sum(r[0] for r in arrived),
    )
    gone = {r[0] for r in moved}
    opened = tuple(r for r in old.open if r[0] not in gone)
    n, ids, ended, ended_ids = old.open_fingerprint
    out = sum(r[0] for r in moved)
    open_fingerprint = (n - len(moved), ids - out, ended - len(moved), ended_ids - out)
    return _entry(floor_s, cutoff_s, closed, fingerprint, opened, open_fingerprint)


def _open_rows(old: Sequence[Row], cutoff_s: float) -> tuple[Row, ...]:
    """The rows still held or ended after ``cutoff_s``: their ids and ends read (a narrow
    query), the rows of ``old`` (the last open part read) given their new end, and only the
    others joined to their GPUs, jobs and tenants (what a placement shows but its end never
    changes). ``old`` empty: all joined at once."""
    q = Q(ended_at__isnull=True, active=True) | Q(ended_at__gt=_at(cutoff_s))
    if not old:
        return tuple(_rows(q))
    exact = connection.vendor == "postgresql"
    ends = raw_rows(
        Placement.objects.filter(q)
        .order_by()
        .annotate(end_s=EpochSeconds("ended_at"))
        .values_list("id", *(() if exact else ("ended_at",)), "end_s")
    )
    known = {r[0]: r for r in old}
    new = [r[0] for r in ends if r[0] not in known]
    joined = {r[0]: r for r in _rows(AnyOf(F("pk"), new))} if new else {}
    out = []
    for i, *times in ends:
        r = known.get(i)
        if r is None:
            r = joined.get(i)  # None: deleted between the two reads (the next request reads again)
        elif r[7] != times[-1]:  # ended since: the kept cells with the new end
            end_us = _us_of_seconds(times[0]) if exact else _us_of_column(times[0])
            r = (*r[:7], times[-1], r[8], end_us)
        if r is not None:
            out.append(r)
    return tuple(out)


def _us_of_seconds(seconds: float | None) -> int | None:
    """PostgreSQL's epoch seconds (exact to the µs, in float8) as exact µs since the epoch."""
    return None if seconds is None else round(seconds * 1e6)


def _rows(q: Any) -> list[Row]:
    """The placement rows matching ``q`` (a ``Q`` or a lookup) as :data:`Row`."""
    columns = ["id", "gpu__node__name", "gpu__index", "slot", "job_id", "job__name", "job__tenant_id"]
    exact = connection.vendor == "postgresql"  # epoch seconds exact to the µs; not on SQLite
    qs = (
        Placement.objects.filter(q)
        .order_by()
        .annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at"))
        .values_list(*columns, *(() if exact else ("created_at", "ended_at")), "begin_s", "end_s")
    )
    labels: dict[tuple[str, int], str] = {}
    out = []
    for i, node, index, slot, job, name, tenant, *times in raw_rows(qs):
        gpu = labels.get((node, index))
        if gpu is None:
            gpu = labels[(node, index)] = gpu_label(node, index)
        b, e = times[-2:]
        if exact:
            b_us, e_us = _us_of_seconds(b), _us_of_seconds(e)
        else:  # the columns, then their epoch seconds
            b_us, e_us = _us_of_column(times[0]), _us_of_column(times[1])
        out.append((i, gpu, slot, job, name, tenant, b, e, b_us, e_us))
    return out


# One pass over the rows of Placement's table (Django's default name) ended after the floor or
# still held (the index on ended_at serves both), then the tenants' names. Written out: the ORM
# spends about as long compiling an aggregate as the database running it.
_FINGERPRINT_SQL = (
    "SELECT 0, COUNT(CASE WHEN c THEN id END), COALESCE(SUM(CASE WHEN c THEN id END), 0), "
    "COUNT(CASE WHEN NOT c THEN id END), COALESCE(SUM(CASE WHEN NOT c THEN id END), 0), "
    "COUNT(CASE WHEN NOT c THEN ended_at END), "
    "COALESCE(SUM(CASE WHEN NOT c AND ended_at IS NOT NULL THEN id END), 0), NULL "
    "FROM (SELECT id, ended_at, (ended_at IS NOT NULL AND ended_at <= %s) AS c FROM cluster_placement "
    "WHERE ended_at > %s OR (active AND ended_at IS NULL)) AS w "
    "UNION ALL SELECT 1, id, 0, 0, 0, 0, 0, name FROM cluster_tenant"
)


def _fingerprints(
    floor_s: float, cutoff_s: float
) -> tuple[tuple[int, int], tuple[int, int, int, int], dict[int, str]]:
    """What the database says now, in one query: (rows, sum of ids) of the rows ended in
    ``(floor_s, cutoff_s]``; (rows, sum of ids, ended rows, sum of their ids) of those ended
    after ``cutoff_s`` or still held; every tenant's name by id."""
    lo, hi = (connection.ops.adapt_datetimefield_value(_at(t)) for t in (floor_s, cutoff_s))
    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL, [hi, lo])
        rows = cursor.fetchall()
    names = {int(r[1]): r[7] for r in rows if r[0] == 1}
    fp = next(tuple(int(v) for v in r[1:7]) for r in rows if r[0] == 0)
    return (fp[0], fp[1]), (fp[2], fp[3], fp[4], fp[5]), names
