"""The charge of a window of placements, with what can no longer change computed once and cached
(docs/PERFORMANCE.md, "Dashboard"): the dashboard's fairness endpoint asks every few seconds for
each tenant's GPU-seconds per bin over the last hour, bins whose edges slide with now.

What is closed: a placement that ended at or before the *cutoff* ``W`` (a multiple of
:data:`GRID_S` at least :data:`MARGIN_S` before now, so a transaction still committing an end
is not missed), whose GPU time nobody open shares. Per GPU the rows are cut into *blocks*
(rows that overlap, chained, and one job's rows that touch); a block is closed when all its rows
are, no row of a job pair charged in it is open (a pair's slowdown is read off its latest row,
``gpu_hours.intervals_of``, so a measurement still arriving for the pair re-splits the past), and
it is then charged once:
its segments go into one :class:`~scheduling.core.cumulative.Cumulative` per tenant. The rest
of the window (open rows, and closed rows in a block with an open row or an open pair: *tainted*,
kept as rows) is charged afresh on every request, so a late slowdown ξ of an open placement
re-splits its partner's past charge exactly as a computation from scratch would.

Invalidation: the cached closed set is fingerprinted (count of rows, sum of their ids, count of
measured slowdowns, over rows ended in ``(L, W]``), and every request compares it with the same
aggregate in the database: a row inserted or deleted in the past (a late commit, a node or tenant
deleted), or a slowdown written to an ended row, makes them differ and the entry is rebuilt from
scratch. A job pair charged in a closed block that is open again makes it rebuilt too. When
the cutoff moves on, an entry is advanced (only the rows open at the old cutoff are read).

Cache: Django's default cache (one entry per window length in steps, key prefix :data:`KEY`),
and this process's copies of the last :data:`KEPT_ENTRIES` used. Units: seconds (s),
GPU-seconds (GPU-s).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from django.core.cache import cache
from django.db import connection
from django.db.models import Q

from cluster.compiled import kept_rows
from cluster.job_tenants import with_tenants
from cluster.models import Placement
from scheduling.core.cumulative import Cumulative
from scheduling.core.usage import charge_segments
from scheduling.service.gpu_hours import intervals_of, placement_rows, slowdowns_of
from scheduling.service.open_charge import GpuCharge, open_curves

#: The cutoff's step (s): an entry is advanced at most once per step.
GRID_S = 60.0
#: A placement ended less than this long ago (s) is never closed: its end may still be committing.
MARGIN_S = 30.0
#: Cache key prefix (then the window's length in steps).
KEY = "sharewise:closed-charge:v1:"
#: How many entries (window lengths) this process keeps at most: a window that begins where a
#: replay of a trace began (``frontend.payloads.clock.TimeScale.window_start``) grows a step a
#: minute, each step a new length; the oldest entry goes first.
KEPT_ENTRIES = 8

# window length key → this process's copy of the entry (at most one per window length polled)
_local: dict[str, ClosedEntry] = {}
# window length key → this process's per-GPU parts of its last open charge (open_charge)
_open_parts: dict[str, dict[int, GpuCharge]] = {}

# row: (id, job, tenant, gpu, begin_s, end_s | None, partner, measured ξ, predicted ξ)
Row = tuple[Any, ...]


@dataclass
class ClosedEntry:
    """What is cached for one window length: cutoff ``cutoff_s`` (W) and floor ``floor_s`` (L),
    both s; ``curves``: ``{tenant id: Cumulative}`` of the closed blocks; ``tainted``: closed rows
    charged with the open ones; ``pairs``: ``{job pair: latest end (s)}`` charged in closed
    blocks; ``fingerprint``: (rows, sum of ids, measured ξ) of the closed rows ended in ``(L, W]``;
    ``segments``: ``(block end, tenant, lo, hi, rate)`` of the closed blocks and ``closed``:
    ``(end, id, has measured ξ)`` of every closed row (both to advance the entry). The open part:
    ``open_curves`` (open rows reaching for ever: valid for any now while the open rows do not
    change) and ``open_fingerprint``, what the database said of them before they were read."""

    cutoff_s: float
    floor_s: float
    curves: dict[int, Cumulative] = field(default_factory=dict)
    tainted: list[Row] = field(default_factory=list)
    pairs: dict[tuple[int, int], float] = field(default_factory=dict)
    fingerprint: tuple[int, ...] = (0, 0, 0)
    segments: list[tuple[float, int, float, float, float]] = field(default_factory=list)
    closed: list[tuple[float, int, bool]] = field(default_factory=list)
    open_curves: dict[int, Cumulative] | None = None
    open_fingerprint: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class WindowCharge:
    """The charge of a window as ``{tenant id: Cumulative}``: ``closed`` (what can no longer
    change) and ``open`` (the rest; its open placements charged for ever after: evaluate it only
    up to the window's end)."""

    closed: dict[int, Cumulative]
    open: dict[int, Cumulative]


def window_charge(start_s: float, now_s: float, *, use_cache: bool = True) -> WindowCharge:
    """What each tenant was charged in ``[start_s, now_s]`` (POSIX s), from the cache where the
    placements did not change (module docstring). Over any bins inside the window, ``closed`` +
    ``open`` equal :func:`~scheduling.service.gpu_hours.charged_segments` of the window up to
    float rounding. ``use_cache=False``: everything afresh, the cache left alone. One query when
    nothing changed, 2 when the open placements did, 3-4 when the cutoff moved on."""
    cutoff = math.floor((now_s - MARGIN_S) / GRID_S) * GRID_S
    steps = math.ceil(max(now_s - start_s, 0.0) / GRID_S)
    floor = cutoff - (steps + 1) * GRID_S  # ≤ start_s for every now of this step
    key = f"{KEY}{steps}"
    # read before the rows: a change in between makes the next request read them again
    closed_fp, open_fp = _fingerprints(floor, cutoff)
    entry = None
    if use_cache:
        # this process's own copy first: validated by the same fingerprints as the shared one,
        # it spares unpickling the entry (1-2 ms) on every poll; the shared one when it is stale
        entry = _local.get(key)
        if entry is None or entry.cutoff_s != cutoff or entry.fingerprint != closed_fp:
            shared = cache.get(key)
            entry = shared if shared is not None else entry
    # the shared cache is written only when the closed part changed: the entry is ~180 KB on the
    # benchmark's cluster (every closed row, to advance it), its open part under 1 KB, and every
    # poll after a round changes the open part; another process whose own copy is behind on the
    # open part charges it afresh (it reads the shared entry only when its closed part is behind)
    closed_dirty = False
    if entry is not None and (entry.floor_s - entry.cutoff_s != floor - cutoff or entry.cutoff_s > cutoff):
        entry = None  # another window geometry, or another process's clock ahead
    if entry is not None and entry.cutoff_s < cutoff:
        entry, closed_dirty = _advanced(entry, cutoff, floor), True
    if entry is None or entry.fingerprint != closed_fp:
        entry, closed_dirty = _built(cutoff, floor), True
    if entry.open_curves is None or entry.open_fingerprint != open_fp:
        fresh = _rows_open_at(cutoff)
        if any(r[6] is not None and _pair(r) in entry.pairs for r in fresh):
            entry, closed_dirty = _built(cutoff, floor), True  # a pair charged as closed shares again
        rows = sorted(entry.tainted + fresh, key=lambda r: (r[4], r[0]))
        # only the GPUs whose rows changed charged again (open_charge); this process's parts of
        # the last open charge of this window length, whichever entry they were charged for:
        # a part is taken only where its GPU's rows and slowdowns are the same
        curves, parts = open_curves(rows, _open_parts.get(key, {}) if use_cache else {})
        if use_cache:
            keep(_open_parts, key, parts)
        # a new entry, not the old one changed: another thread of this process may be reading
        # the old one (its curves and fingerprint must stay a pair)
        entry = replace(entry, open_curves=curves, open_fingerprint=open_fp)
    if use_cache:
        keep(_local, key, entry)
        if closed_dirty:
            cache.set(key, entry, timeout=int(4 * GRID_S + steps * GRID_S))
    return WindowCharge(entry.curves, entry.open_curves)


def keep(local: dict[Any, Any], key: Any, entry: Any) -> None:
    """Put ``entry`` at ``key`` of a process's ``local`` entries, the oldest put dropped beyond
    :data:`KEPT_ENTRIES` (threads may put at once: a key already dropped is skipped)."""
    local[key] = entry
    for old in list(local)[: max(len(local) - KEPT_ENTRIES, 0)]:
        local.pop(old, None)


def forget() -> None:
    """Drop this process's copies of the entries (the shared cache is left alone): for tests
    that start a fresh database whose ids may repeat an earlier one's."""
    _local.clear()
    _open_parts.clear()


def _pair(row: Row) -> tuple[int, int]:
    a, b = row[1], row[6]
    return (a, b) if a <= b else (b, a)


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _open_q() -> Q:
    return Q(ended_at__isnull=True, active=True)


def _rows_open_at(cutoff_s: float) -> list[Row]:
    """Rows open at ``cutoff_s``: still held, or ended after it (ints and floats: the cursor's
    values are the ORM's, :func:`cluster.compiled.kept_rows`)."""
    return with_tenants(kept_rows(_open_at, _at(cutoff_s)), 1)


def _open_at(cutoff: datetime) -> Any:
    """The query of :func:`_rows_open_at`."""
    return placement_rows(Placement.objects.filter(_open_q() | Q(ended_at__gt=cutoff)), "id")


def _rows_held_in(lo_s: float, hi_s: float) -> list[Row]:
    """The rows of :func:`_held_in` (POSIX s), with their tenants."""
    return with_tenants(kept_rows(_held_in, _at(lo_s), _at(hi_s)), 1)


def _held_in(lo: datetime, hi: datetime) -> Any:
    """The placements open after ``lo`` (still held, or ended after it) that began or ended by
    ``hi``, as rows (the queries of :func:`_built` and :func:`_advanced`)."""
    return placement_rows(
        Placement.objects.filter(_open_q() | Q(ended_at__gt=lo)).filter(
            Q(created_at__lte=hi) | Q(ended_at__lte=hi)
        ),
        "id",
    )


def _fingerprints(floor_s: float, cutoff_s: float) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """What the database says now, in one query, of the closed rows (ended in ``(floor_s,
    cutoff_s]``: rows, sum of ids, measured ξ) and of the open ones (ended after ``cutoff_s``
    or still held: rows, sum of ids, ended rows and the sum of their ids, sum of partner ids, and
    the measured and predicted ξ in millionths): a row inserted, deleted, ended, re-paired or
    given a new ξ changes one of them."""
    lo, hi = (connection.ops.adapt_datetimefield_value(_at(t)) for t in (floor_s, cutoff_s))
    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL, [lo, hi, hi, lo, hi, hi])
        got = [int(v or 0) for v in cursor.fetchone()]
    return tuple(got[:3]), tuple(got[3:])


# One pass over the window's rows of Placement's table (Django's default name, cluster_placement;
# the index on ended_at serves IS NULL too). Written out: the ORM spends longer compiling this
# aggregate than the database running it.
_OPEN = "((active AND ended_at IS NULL) OR ended_at > %s)"
_FINGERPRINT_SQL = (
    "SELECT COUNT(CASE WHEN c THEN id END), SUM(CASE WHEN c THEN id END), "
    "COUNT(CASE WHEN c THEN measured_slowdown END), "
    "COUNT(CASE WHEN o THEN id END), SUM(CASE WHEN o THEN id END), "
    "COUNT(CASE WHEN o THEN ended_at END), SUM(CASE WHEN o AND ended_at IS NOT NULL THEN id END), "
    "SUM(CASE WHEN o THEN shared_with END), "
    "SUM(CASE WHEN o THEN CAST(measured_slowdown * 1000000.0 AS BIGINT) END), "
    "SUM(CASE WHEN o THEN CAST(predicted_slowdown * 1000000.0 AS BIGINT) END) "
    "FROM (SELECT id, ended_at, shared_with, measured_slowdown, predicted_slowdown, "
    "(ended_at > %s AND ended_at <= %s) AS c, " + _OPEN + " AS o FROM cluster_placement "
    "WHERE (ended_at > %s AND ended_at <= %s) OR " + _OPEN + ") AS w"
)


def _built(cutoff_s: float, floor_s: float) -> ClosedEntry:
    """A new entry: every row held in ``(floor_s, cutoff_s]`` read and split (module docstring)."""
    entry = ClosedEntry(cutoff_s, floor_s)
    _fold(entry, _rows_held_in(floor_s, cutoff_s))
    return entry


def _advanced(old: ClosedEntry, cutoff_s: float, floor_s: float) -> ClosedEntry:
    """``old`` moved on to ``cutoff_s``: rows ended before ``floor_s`` dropped, the rows open at
    the old cutoff read and split with its tainted rows."""
    entry = ClosedEntry(
        cutoff_s,
        floor_s,
        pairs={p: end for p, end in old.pairs.items() if end > floor_s},
        segments=[s for s in old.segments if s[0] > floor_s],
        closed=[c for c in old.closed if c[0] > floor_s],
    )
    rows = [r for r in old.tainted if r[5] > floor_s] + _rows_held_in(old.cutoff_s, cutoff_s)
    rows.sort(key=lambda r: (r[4], r[0]))
    _fold(entry, rows, known_closed={r[0] for r in old.tainted})
    return entry


def _fold(entry: ClosedEntry, rows: Sequence[Row], known_closed: Iterable[int] = ()) -> None:
    """Split ``rows`` (oldest first) at ``entry.cutoff_s`` into closed blocks (charged into
    ``entry.segments``) and tainted rows; rebuild the curves and the fingerprint."""
    cutoff, floor = entry.cutoff_s, entry.floor_s
    seen_closed = set(known_closed)
    is_closed = {r[0]: r[5] is not None and r[5] <= cutoff for r in rows}
    open_pairs = {_pair(r) for r in rows if r[6] is not None and not is_closed[r[0]]}
    clean: list[Row] = []
    entry.tainted = []
    for block in _blocks(rows):
        closed = all(is_closed[r[0]] for r in block)
        if closed and not any(r[6] is not None and _pair(r) in open_pairs for r in block):
            clean.extend(block)
        elif closed or any(is_closed[r[0]] for r in block):
            entry.tainted.extend(r for r in block if is_closed[r[0]])
    for r in rows:
        if is_closed[r[0]] and r[0] not in seen_closed:
            entry.closed.append((r[5], r[0], r[7] is not None))
    if clean:
        rule = slowdowns_of([r[1:] for r in rows if is_closed[r[0]]])
        for block in _blocks(clean):
            end = max(r[5] for r in block)
            intervals, _ = intervals_of([r[1:] for r in block], cutoff, rule)
            entry.segments.extend(
                (end, int(s.tenant), s.start_s, s.end_s, s.rate) for s in charge_segments(intervals, rule)
            )
            for r in block:
                if r[6] is not None:
                    entry.pairs[_pair(r)] = max(entry.pairs.get(_pair(r), -math.inf), r[5])
    entry.tainted.sort(key=lambda r: (r[4], r[0]))
    per_tenant: dict[int, list[tuple[float, float, float]]] = {}
    for _, tenant, lo, hi, rate in entry.segments:
        per_tenant.setdefault(tenant, []).append((lo, hi, rate))
    entry.curves = {t: Cumulative(segs) for t, segs in per_tenant.items()}
    entry.open_curves = None  # the open part is read again at this cutoff
    mine = [(i, xi) for end, i, xi in entry.closed if floor < end <= cutoff]
    entry.fingerprint = (len(mine), sum(i for i, _ in mine), sum(1 for _, xi in mine if xi))


def _blocks(rows: Sequence[Row]) -> list[list[Row]]:
    """Per GPU, rows that overlap in time, chained (an open row reaches for ever), and rows of one
    job that touch (merged into one span, ``gpu_hours.merged_spans``). Rows of two jobs that only
    touch (one ends as the next begins: a busy GPU's history) hold the GPU at no common instant,
    so they fall in separate blocks and a long busy history still closes row by row."""
    by_gpu: dict[int, list[Row]] = {}
    for r in rows:
        by_gpu.setdefault(r[3], []).append(r)
    out: list[list[Row]] = []
    for members in by_gpu.values():
        members.sort(key=lambda r: (r[4], r[0]))
        block: list[Row] = []
        jobs: set[int] = set()
        reach = -math.inf
        for r in members:
            if block and not (r[4] < reach or (r[4] == reach and r[1] in jobs)):
                out.append(block)
                block, jobs = [], set()
            block.append(r)
            jobs.add(r[1])
            reach = max(reach, math.inf if r[5] is None else r[5])
        if block:
            out.append(block)
    return out
