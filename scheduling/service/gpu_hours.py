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
from typing import Any

from django.db.models import Q

from cluster.expressions import EpochSeconds
from cluster.models import Job, Placement, Quota, Tenant
from scheduling.core.types import JobId
from scheduling.core.usage import (
    ChargeSegment,
    Interval,
    active_tenants,
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
    guaranteed GPUs × the window (h), and their ratio ``share_of_quota`` (``None`` without a
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
    windows_s: Sequence[int], now: datetime, tenant_ids: Iterable[int] | None = None
) -> UsageWindows:
    """GPU-hours of each tenant (``None``: every tenant) over each window ending at ``now``, and
    the windowed fairness of each window over all tenants (it names nobody but by id). 3 queries
    plus one per window for the tenants with work."""
    now_s = now.timestamp()
    longest = max(windows_s)
    guaranteed = {
        t: q.guaranteed_gpus
        for t, q in summed_quotas(
            Quota.objects.order_by().values_list("tenant_id", "guaranteed_gpus", "borrow_limit")
        ).items()
    }
    segments = charged_segments(now_s - longest, now_s)
    spans = _job_spans(now_s - longest, now_s)
    wanted = (
        list(Tenant.objects.order_by("name").values_list("pk", flat=True))
        if tenant_ids is None
        else list(tenant_ids)
    )
    per_tenant: dict[int, list[TenantWindow]] = {t: [] for t in wanted}
    fairness = []
    for window in windows_s:
        hours = gpu_hours_between(segments, now_s - window, now_s)
        for t in wanted:
            used, entitled = hours.get(str(t), 0.0), guaranteed.get(t, 0) * window / 3600.0
            per_tenant[t].append(
                TenantWindow(window, used, entitled, used / entitled if entitled > 0 else None)
            )
        active = active_tenants(spans, now_s - window, now_s)
        demanding = sorted(int(t) for t in active if guaranteed.get(int(t), 0) > 0)
        jain, ratio = window_fairness(hours, {str(t): guaranteed[t] for t in demanding})
        fairness.append(WindowFairness(window, _finite(jain), _finite(ratio), tuple(demanding)))
    return UsageWindows(tuple(windows_s), per_tenant, fairness)


def charged_segments(lo_s: float, hi_s: float) -> list[ChargeSegment]:
    """What each tenant was charged in ``[lo_s, hi_s]`` (POSIX s): the core's segments
    (:func:`scheduling.core.usage.charge_segments`) of the placements of that span (tenant: its id
    as text), a shared GPU split by normalised progress (module docstring)."""
    return charge_segments(*_intervals(lo_s, hi_s))


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


#: The columns of a placement row as :func:`intervals_of` reads them.
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


def placement_rows(queryset: Any, *first: str) -> Any:
    """``queryset`` of placements as rows ``(*first, *ROW_FIELDS)`` (times: POSIX s; ``end_s``
    ``None`` while open), oldest first (``created_at``, then id: the order in which
    :func:`intervals_of` lets a later row's slowdown replace an earlier one of the same pair)."""
    return (
        queryset.order_by("created_at", "id")
        .annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at"))
        .values_list(*first, *ROW_FIELDS)
    )


def _intervals(lo_s: float, hi_s: float) -> tuple[list[Interval], Callable[[JobId, JobId], float]]:
    """The core's intervals of the placements that held a GPU in ``[lo_s, hi_s]`` and the pair
    slowdown they were charged by (:func:`intervals_of`)."""
    rows = placement_rows(
        Placement.objects.filter(created_at__lt=_at(hi_s)).filter(
            Q(ended_at__isnull=True, active=True) | Q(ended_at__gt=_at(lo_s))
        )
    )
    return intervals_of(rows, hi_s)


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


def _job_spans(lo_s: float, hi_s: float) -> list[tuple[str, float, float]]:
    """``(tenant id as text, submit s, end s)`` of the jobs pending or running at some time in
    ``[lo_s, hi_s]`` (end: ``finished_at``, or ``hi_s`` while still pending or running)."""
    rows = (
        Job.objects.filter(submitted_at__lt=_at(hi_s))
        .filter(Q(finished_at__isnull=True, status__in=Job.ACTIVE_STATUSES) | Q(finished_at__gt=_at(lo_s)))
        .order_by()
        .annotate(begin_s=EpochSeconds("submitted_at"), end_s=EpochSeconds("finished_at"))
        .values_list("tenant_id", "begin_s", "end_s")
    )
    return [(str(t), begin, hi_s if end is None else end) for t, begin, end in rows]


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
