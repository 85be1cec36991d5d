"""Each tenant's GPU-hours over sliding windows ending now (e.g. the last 2 h and 24 h), beside its
guarantee, and the windowed fairness figure (docs/FAIRNESS.md §3–4, "Windows in the service").

The rule is the core's (:mod:`scheduling.core.usage`): a GPU held by one job charges it 1 GPU-s
per second, a shared GPU is split by normalised progress ``ξ_b / (ξ_a + ξ_b)``. Here the
intervals are the ``Placement`` rows (``created_at`` → ``ended_at``, or now while active) and ``ξ``
of a job beside its partner is the slowdown measured on that GPU since, else the one the
scheduler predicted; when either side of a pair has neither, the pair is split evenly (½/½).

Windows are given as ``2h,24h`` (or seconds, ``7200,86400``): :func:`parse_windows`.
Units: seconds (s), GPU-hours.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Least

from cluster.compiled import compiled_at
from cluster.expressions import EpochSeconds
from cluster.job_tenants import with_tenants
from cluster.models import Job, Placement, Quota, Tenant
from scheduling.core.types import JobId
from scheduling.core.usage import (
    ChargeSegment,
    Interval,
    active_tenants_over,
    charge_segments,
    gpu_hours_between,
    window_fairness,
)
from scheduling.service.fairness import summed_quotas

#: The windows reported when a request names none (s): the last 2 h and the last 24 h.
DEFAULT_WINDOWS_S: tuple[int, ...] = (7200, 86400)
#: Shortest and longest window (s), and how many one request may ask for.
MIN_WINDOW_S, MAX_WINDOW_S, MAX_WINDOWS = 60, 7 * 86400, 4

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_WINDOW = re.compile(r"^([0-9]{1,7})([smhd]?)$")


def parse_windows(raw: str | None) -> tuple[int, ...]:
    """Windows (s) from ``raw``: comma-separated whole numbers with an optional unit ``s``, ``m``,
    ``h`` or ``d`` (``"2h,24h"``; no unit: seconds); ``None`` or empty: :data:`DEFAULT_WINDOWS_S`.
    Duplicates are dropped, the order kept. Raises ``ValueError`` with a readable message for a
    malformed entry, a window outside ``MIN_WINDOW_S``…``MAX_WINDOW_S`` or more than
    ``MAX_WINDOWS`` windows."""
    if raw is None or raw.strip() == "":
        return DEFAULT_WINDOWS_S
    out: list[int] = []
    parts = raw.split(",")
    if len(parts) > MAX_WINDOWS:
        raise ValueError(f"at most {MAX_WINDOWS} windows, got {len(parts)}")
    for part in parts:
        match = _WINDOW.match(part.strip())
        if match is None:
            raise ValueError(
                f"each window is a whole number with an optional unit s, m, h or d (e.g. 2h,24h), "
                f"got {part.strip()[:20]!r}"
            )
        seconds = int(match.group(1)) * _UNITS[match.group(2) or "s"]
        if not MIN_WINDOW_S <= seconds <= MAX_WINDOW_S:
            raise ValueError(
                f"each window must be {MIN_WINDOW_S} s to {MAX_WINDOW_S // 86400} days, got {part.strip()!r}"
            )
        if seconds not in out:
            out.append(seconds)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class TenantWindow:
    """One tenant over one window of ``window_s`` s: ``gpu_hours`` charged, ``quota_gpu_hours`` =
    guaranteed GPUs × the wall time the window covers (h; the window itself outside a replay,
    :func:`usage_windows`), and their ratio ``share_of_quota`` (``None`` without a
    guarantee)."""

    window_s: int
    gpu_hours: float
    quota_gpu_hours: float
    share_of_quota: float | None


@dataclass(frozen=True, slots=True)
class WindowFairness:
    """The windowed fairness figure of one window (``window_s`` s): Jain's index and the max/min
    ratio of ``GPU-hours ÷ guaranteed GPUs`` over the ``tenants`` (ids) that demanded GPUs in it
    (:func:`scheduling.core.usage.window_fairness`, :func:`scheduling.core.usage.active_tenants`);
    ``None`` when no such tenant has a guarantee."""

    window_s: int
    jain_index: float | None
    max_min_ratio: float | None
    tenants: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class UsageWindows:
    """``per_tenant``: ``{tenant id: [TenantWindow per window]}`` (every tenant asked for);
    ``fairness``: one :class:`WindowFairness` per window, cluster-wide."""

    windows_s: tuple[int, ...]
    per_tenant: dict[int, list[TenantWindow]]
    fairness: list[WindowFairness]


def usage_windows(
    windows_s: Sequence[int],
    now: datetime,
    tenant_ids: Iterable[int] | None = None,
    *,
    cached: bool = False,
    guaranteed: Mapping[int, int] | None = None,
    lengths_s: Sequence[float] | None = None,
) -> UsageWindows:
    """GPU-hours of each tenant (``None``: every tenant) over each window ending at ``now``, and
    the windowed fairness of each window over all tenants (it names nobody but by id). 4 queries.

    ``lengths_s``: the wall seconds each window covers before ``now``, one per window (default:
    ``windows_s``, wall time). A replay of a trace (``frontend.payloads.clock.TimeScale``) names a
    window in trace seconds that covers fewer wall seconds; the windows keep their names
    (``window_s``) and every figure is over the length — wall GPU-hours, the guarantee's
    GPU-hours of the length, "work for at least half of the length" — for the caller to convert.
    Raises ``ValueError`` when ``lengths_s`` and ``windows_s`` differ in length.

    ``cached``: the GPU-hours from the cached charge of the longest window
    (:func:`scheduling.service.closed_charge.window_charge`: what can no longer change charged once,
    the rest while a one-query fingerprint holds), equal to the charge from scratch up to float
    rounding (1e-12 relative); without it every placement of the longest window is charged afresh.
    With ``cached`` the spans of the jobs finished in the closed past come merged from
    :func:`scheduling.service.closed_runs.job_spans` too (the same tenants compared).
    ``guaranteed``: ``{tenant id: guaranteed GPUs}`` of every tenant (summed over its quota rows,
    :func:`~scheduling.service.fairness.summed_quotas`) when the caller has read them already;
    default: read here.
    """
    now_s = now.timestamp()
    lengths_s = windows_s if lengths_s is None else lengths_s
    if len(lengths_s) != len(windows_s):
        raise ValueError(f"one length per window: {len(lengths_s)} lengths for {len(windows_s)} windows")
    longest = max(lengths_s)
    if guaranteed is None:
        guaranteed = {
            t: q.guaranteed_gpus
            for t, q in summed_quotas(
                Quota.objects.order_by().values_list("tenant_id", "guaranteed_gpus", "borrow_limit")
            ).items()
        }
    if cached:
        # imported here: closed_runs builds on this module's RUNS_SQL
        from scheduling.service.closed_runs import job_spans

        hours_in = _cached_hours(now_s - longest, now_s)
        spans = job_spans(now_s - longest, now_s)
    else:
        segments = charged_segments(now_s - longest, now_s)
        hours_in = partial(gpu_hours_between, segments, hi_s=now_s)
        spans = job_spans_afresh(now_s - longest, now_s)
    actives = active_tenants_over(spans, now_s, lengths_s)
    wanted = (
        list(Tenant.objects.order_by("name").values_list("pk", flat=True))
        if tenant_ids is None
        else list(tenant_ids)
    )
    per_tenant: dict[int, list[TenantWindow]] = {t: [] for t in wanted}
    fairness = []
    for window, span, active in zip(windows_s, lengths_s, actives, strict=True):
        hours = hours_in(now_s - span)
        for t in wanted:
            used, entitled = hours.get(str(t), 0.0), guaranteed.get(t, 0) * span / 3600.0
            per_tenant[t].append(
                TenantWindow(window, used, entitled, used / entitled if entitled > 0 else None)
            )
        demanding = sorted(int(t) for t in active if guaranteed.get(int(t), 0) > 0)
        jain, ratio = window_fairness(hours, {str(t): guaranteed[t] for t in demanding})
        fairness.append(WindowFairness(window, _finite(jain), _finite(ratio), tuple(demanding)))
    return UsageWindows(tuple(windows_s), per_tenant, fairness)


def _cached_hours(lo_s: float, now_s: float) -> Callable[[float], dict[str, float]]:
    """``hours(a)``: tenant (id as text) → GPU-hours charged in ``[a, now_s]`` for any
    ``a ≥ lo_s``, from the cached charge of ``[lo_s, now_s]`` (tenants sorted, as
    :func:`~scheduling.core.usage.gpu_hours_between` gives them; a tenant charged nothing left out)."""
    # imported here: closed_charge builds on this module's placement rows
    from scheduling.service.closed_charge import window_charge

    part = window_charge(lo_s, now_s)
    curves = [(t, c) for side in (part.closed, part.open) for t, c in side.items()]

    def hours(a_s: float) -> dict[str, float]:
        used: dict[str, float] = {}
        for tenant, curve in curves:
            charged = curve.bins(a_s, now_s - a_s, 1)[0]
            if charged > 0:
                used[str(tenant)] = used.get(str(tenant), 0.0) + charged / 3600.0
        return dict(sorted(used.items()))

    return hours


def charged_segments(lo_s: float, hi_s: float) -> list[ChargeSegment]:
    """What each tenant was charged in ``[lo_s, hi_s]`` (POSIX s): the core's segments
    (:func:`scheduling.core.usage.charge_segments`) of the placements of that span (tenant: its id
    as text), a shared GPU split by normalised progress (module docstring)."""
    return charge_segments(*_intervals(lo_s, hi_s))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


#: The columns of a placement row as :func:`intervals_of` reads them: the job, its tenant, then
#: :data:`READ_FIELDS` but the job.
ROW_FIELDS = (
    "job_id",
    "job__tenant_id",
    "gpu_id",
    "begin_s",
    "end_s",
    "shared_with",
    "measured_slowdown",
    "predicted_slowdown",
)
#: The columns :func:`placement_rows` reads: :data:`ROW_FIELDS` but the tenant, which
#: :func:`~cluster.job_tenants.with_tenants` puts in (a join of every job cost more than the rest
#: of the read, docs/PERFORMANCE.md §6).
READ_FIELDS = tuple(f for f in ROW_FIELDS if f != "job__tenant_id")


def placement_rows(queryset: Any, *first: str) -> Any:
    """``queryset`` of placements as rows ``(*first, *READ_FIELDS)`` (times: POSIX s; ``end_s``
    ``None`` while open), oldest first (``created_at``, then id: the order in which
    :func:`intervals_of` lets a later row's slowdown replace an earlier one of the same pair).
    ``with_tenants(rows, len(first))`` (:func:`cluster.job_tenants.with_tenants`) makes them
    ``(*first, *ROW_FIELDS)``."""
    return (
        queryset.order_by("created_at", "id")
        .annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at"))
        .values_list(*first, *READ_FIELDS)
    )


def _intervals(lo_s: float, hi_s: float) -> tuple[list[Interval], Callable[[JobId, JobId], float]]:
    """The core's intervals of the placements that held a GPU in ``[lo_s, hi_s]`` and the pair
    slowdown they were charged by (:func:`intervals_of`)."""
    rows = placement_rows(
        Placement.objects.filter(created_at__lt=_at(hi_s)).filter(
            Q(ended_at__isnull=True, active=True) | Q(ended_at__gt=_at(lo_s))
        )
    )
    return intervals_of(with_tenants(rows), hi_s)


def intervals_of(
    rows: Iterable[tuple], hi_s: float, rule: Callable[[JobId, JobId], float] | None = None
) -> tuple[list[Interval], Callable[[JobId, JobId], float]]:
    """The core's intervals of placement ``rows`` (:data:`ROW_FIELDS`, oldest first; tenant: its
    id as text; open rows end at ``hi_s``, s; a job's rows on one GPU merged, so a re-plan does
    not make it two jobs) and the pair slowdown they are charged by: ``rule``, default
    :func:`slowdowns_of` the same rows (module docstring)."""
    rows = list(rows)
    held: dict[tuple[int, int], list[tuple[float, float]]] = {}
    tenant: dict[int, int] = {}
    for job, owner, gpu, begin, end, *_ in rows:
        end = hi_s if end is None else min(end, hi_s)
        tenant[job] = owner
        if end <= begin:
            continue  # a row that ends before it begins holds no GPU time (and must not widen a merge)
        held.setdefault((job, gpu), []).append((begin, end))
    intervals = [
        Interval(job, str(tenant[job]), (gpu,), begin, end)
        for (job, gpu), spans in held.items()
        for begin, end in merged_spans(spans)
    ]
    return intervals, rule if rule is not None else slowdowns_of(rows)


def slowdowns_of(rows: Iterable[tuple]) -> Callable[[JobId, JobId], float]:
    """The pair slowdown (:func:`pair_rule`) of placement ``rows`` (:data:`ROW_FIELDS`, oldest
    first: a later row's slowdown of a pair replaces an earlier one, :func:`note_slowdown`)."""
    xi: dict[tuple[JobId, JobId], float] = {}
    for job, _, _, _, _, partner, measured, predicted in rows:
        note_slowdown(xi, job, partner, measured, predicted)
    return pair_rule(xi)


def merged_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """One job's ``(begin, end)`` rows on one GPU (s) as disjoint spans: rows that overlap or touch
    (a re-plan ends one row as the next begins) become one span, so a re-plan does not make the
    job two jobs on its GPU; rows apart stay apart, so a job preempted and placed again on the same
    GPU is not charged for the time between."""
    out: list[tuple[float, float]] = []
    for begin, end in sorted(spans):
        if out and begin <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return out


def note_slowdown(
    xi: dict[tuple[JobId, JobId], float],
    job: JobId,
    partner: JobId | None,
    measured: float | None,
    predicted: float | None,
) -> None:
    """Record in ``xi`` the slowdown of ``job`` beside ``partner`` from one ``Placement`` row: the
    one measured since it was placed, else the one the round predicted (none: nothing noted)."""
    slowdown = measured if measured is not None else predicted
    if partner is not None and slowdown is not None and slowdown > 0:
        xi[(job, partner)] = slowdown


def pair_rule(xi: Mapping[tuple[JobId, JobId], float]) -> Callable[[JobId, JobId], float]:
    """The ``pair_slowdown(a, b)`` the normalised split is charged by: ``xi[(a, b)]`` when both
    sides of the pair are known, else 1.0 for both (the even split) — one known side alone would
    skew the split."""

    def pair_slowdown(a: JobId, b: JobId) -> float:
        return xi[(a, b)] if (a, b) in xi and (b, a) in xi else 1.0

    return pair_slowdown


def pending_span_sql(hi: datetime) -> tuple[str, tuple[Any, ...]]:
    """SQL and parameters of the rows ``(tenant_id, begin_s)``, one per tenant: the earliest
    submission (epoch s) of its jobs pending or running submitted before ``hi`` (a window's end),
    ``NULL`` when it has none (skip those rows: a ``WHERE`` on it would plan the subqueries
    twice) — those jobs all reach the window's end, so a 10,000-job queue is one span per
    tenant. Per tenant and active status the first entry of the ``job_tenant_status_submitted``
    index in submission order (a few index probes; a ``MIN`` grouped by tenant read all 7,000
    such jobs of the benchmark); the earliest of them is the ``MIN`` over the tenant's jobs.
    Compiled once per process (:func:`cluster.compiled.compiled_at`)."""
    return compiled_at(pending_spans_query, hi)


def pending_spans_query(hi: datetime) -> QuerySet[Tenant, tuple[Any, ...]]:
    """The query of :func:`pending_span_sql`."""
    firsts = [
        Subquery(
            Job.objects.filter(
                tenant_id=OuterRef("pk"), status=status, finished_at__isnull=True, submitted_at__lt=hi
            )
            .order_by("submitted_at")
            .values("submitted_at")[:1]
        )
        for status in Job.ACTIVE_STATUSES
    ]
    # NULL for a status without such a job: each Coalesce starts at another status's first, so
    # Least (which is NULL as soon as one argument is on SQLite) sees a NULL only when all are
    rotated = [Coalesce(*firsts[k:], *firsts[:k]) for k in range(len(firsts))]
    earliest = Least(*rotated) if len(rotated) > 1 else rotated[0]
    return (
        Tenant.objects.order_by()
        .annotate(tenant_id=F("pk"), begin_s=EpochSeconds(earliest))
        .values_list("tenant_id", "begin_s")
    )


def job_spans_afresh(lo_s: float, hi_s: float) -> list[tuple[str, float, float]]:
    """Spans ``(tenant id as text, begin s, end s)`` whose union per tenant is the time some job
    of the tenant was pending or running in ``[lo_s, hi_s]`` (a job's span: submit →
    ``finished_at``, or ``hi_s`` while still pending or running). The jobs still pending or running
    all reach ``hi_s``, so they come as one span per tenant from its earliest submission (a
    10,000-job queue is 1 row, not 10,000); the finished ones one span each."""
    waiting_sql, waiting_params = pending_span_sql(_at(hi_s))
    finished = (
        Job.objects.filter(submitted_at__lt=_at(hi_s), finished_at__gt=_at(lo_s))
        .order_by()
        .annotate(begin_s=EpochSeconds("submitted_at"), end_s=EpochSeconds("finished_at"))
        .values_list("tenant_id", "begin_s", "end_s")
    )
    # one statement (one round trip): the waiting jobs' earliest submission per tenant, then the
    # finished jobs' runs (neither filter can make Django refuse to write SQL: no `__in`)
    finished_sql, finished_params = finished.query.sql_with_params()
    with connection.cursor() as cursor:
        runs_sql = RUNS_SQL.format(spans=finished_sql)
        cursor.execute(
            f"SELECT 0, tenant_id, begin_s, NULL FROM ({waiting_sql}) waiting "
            f"UNION ALL SELECT 1, * FROM ({runs_sql}) runs",
            (*waiting_params, *finished_params),
        )
        rows = cursor.fetchall()
    spans = [(str(t), begin, hi_s) for kind, t, begin, _ in rows if kind == 0 and begin is not None]
    return spans + [(str(t), begin, end) for kind, t, begin, end in rows if kind == 1]


#: Per tenant, the union of the spans ``(tenant_id, begin_s, end_s)`` of a subquery as its
#: maximal runs (gaps and islands): ordered by begin, a span opens a new run unless it begins at
#: or before the latest end of the tenant's spans before it (touching spans join, as
#: :func:`~scheduling.core.usage.active_tenants_over` merges them). Runs are unions of the
#: same floats (``MIN``/``MAX``), so every covered length is the one the spans give.
RUNS_SQL = """
SELECT tenant_id, MIN(begin_s), MAX(end_s) FROM (
  SELECT tenant_id, begin_s, end_s, SUM(CASE WHEN begin_s <= prev_end THEN 0 ELSE 1 END)
    OVER (PARTITION BY tenant_id ORDER BY begin_s, end_s ROWS UNBOUNDED PRECEDING) AS run
  FROM (
    SELECT tenant_id, begin_s, end_s, MAX(end_s) OVER (PARTITION BY tenant_id ORDER BY begin_s, end_s
      ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM ({spans}) spans
  ) ordered
) numbered
GROUP BY tenant_id, run
"""


def plain_rows(query: Any) -> list[tuple]:
    """The rows of a ``values_list`` query as the cursor gives them (plain numbers and strings:
    the ORM's per-row converters cost more than the query for thousands of rows; booleans are
    0/1 on SQLite). Annotations must come last in ``values_list``: that is their place in the
    SQL. A query Django knows matches nothing (``__in=[]``) has no SQL: no rows."""
    try:
        sql, params = query.query.sql_with_params()
    except EmptyResultSet:
        return []
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
