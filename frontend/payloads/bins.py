"""Per-tenant series over equal time bins, for the fairness endpoint: GPU-seconds charged (a shared
GPU split by normalised progress) and whether a tenant had work in a bin."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from django.db.models import Value

from cluster.expressions import BinIndex, EpochSeconds
from cluster.models import Job
from frontend.payloads.common import placements_in_window, raw_rows
from scheduling.core.cumulative import Cumulative
from scheduling.core.usage import ChargeSegment


class Bins:
    """Per-key sums of ``weight × overlap`` of intervals with equal bins, in O(1) per interval:
    the partial first and last bins directly, the full bins between as a difference array."""

    def __init__(self, start_s: float, width_s: float, bins: int) -> None:
        self.start_s, self.width_s, self.bins = start_s, width_s, bins
        self.partial: dict[int, list[float]] = {}
        self.full: dict[int, list[float]] = {}

    def add(self, key: int, a: float, b: float, weight: float) -> None:
        """Add ``weight × |[a, b] ∩ bin k|`` to bin k of ``key`` (``a``, ``b``: epoch s)."""
        width, n = self.width_s, self.bins
        a, b = max(a - self.start_s, 0.0), min(b - self.start_s, n * width)
        if b <= a:
            return
        partial = self.partial.setdefault(key, [0.0] * n)
        first, last = min(int(a // width), n - 1), min(int(b // width), n - 1)
        if first == last:
            partial[first] += weight * (b - a)
            return
        partial[first] += weight * ((first + 1) * width - a)
        partial[last] += weight * (b - last * width)
        if last > first + 1:
            full = self.full.setdefault(key, [0.0] * (n + 1))
            full[first + 1] += weight
            full[last] -= weight

    def totals(self) -> dict[int, list[float]]:
        """``{key: [sum per bin]}``."""
        result = {}
        for key, partial in self.partial.items():
            full, level, sums = self.full.get(key, ()), 0.0, []
            for k, value in enumerate(partial):
                level += full[k] if full else 0.0
                sums.append(value + level * self.width_s)
            result[key] = sums
        return result


def window_usage(start: datetime, now: datetime) -> list[tuple[int, int, float, float]]:
    """``(GPU id, tenant id, begin, end)`` of the placements of ``[start, now]`` (clipped, s)."""
    rows = raw_rows(
        placements_in_window(start, now)
        .annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at"))
        .values_list("gpu_id", "job__tenant_id", "begin_s", "end_s")
    )
    lo, hi = start.timestamp(), now.timestamp()
    clipped = [
        (gpu, tenant, max(begin, lo), hi if end is None else min(end, hi)) for gpu, tenant, begin, end in rows
    ]
    # an interval that ends before it begins (rows written before ended_at was kept ≥ created_at)
    # holds no GPU time
    return [row for row in clipped if row[3] > row[2]]


def usage_bins(
    segments: Iterable[ChargeSegment], start_s: float, width_s: float, bins: int
) -> dict[int, list[float]]:
    """``{tenant id: [GPU-seconds per bin]}`` of the charge ``segments`` (the service's
    ``charged_segments``: a shared GPU split by normalised progress, docs/FAIRNESS.md §3, so a
    shared GPU-second is never counted twice, TESTING.md invariant 7). Bins of ``width_s`` s from
    ``start_s``."""
    charged = Bins(start_s, width_s, bins)
    for seg in segments:
        charged.add(int(seg.tenant), seg.start_s, seg.end_s, seg.rate)
    return charged.totals()


def curve_bins(
    parts: Iterable[Mapping[int, Cumulative]], start_s: float, width_s: float, bins: int
) -> dict[int, list[float]]:
    """``{tenant id: [GPU-seconds per bin]}`` (bins of ``width_s`` s from ``start_s``) of a
    window's charge given as curves (the service's ``window_charge``: its ``closed`` and
    ``open`` parts, each ``{tenant id: Cumulative}``), summed over the parts. Equal to
    :func:`usage_bins` of the window's charge segments up to float rounding; a tenant charged
    nothing in the window is left out, as there."""
    charged: dict[int, list[float]] = {}
    for curves in parts:
        for tenant, curve in curves.items():
            values = curve.bins(start_s, width_s, bins)
            if not any(values):
                continue  # charged before the window only
            mine = charged.get(tenant)
            if mine is None:
                charged[tenant] = values
            else:
                for k, value in enumerate(values):
                    mine[k] += value
    return charged


def finished_bins(start: datetime, now: datetime, width_s: float) -> Any:
    """The distinct ``(tenant id, first bin, last bin)`` of the jobs that finished after ``start``
    and were submitted before ``now`` (a ``values_list`` query; bins of ``width_s`` s from
    ``start``, numbered from 0 and not clamped): :func:`demand_bins`'s finished jobs."""

    def bin_of(field: str) -> Any:
        return BinIndex((EpochSeconds(field) - Value(start.timestamp())) / Value(width_s))

    return (
        Job.objects.filter(finished_at__gt=start, submitted_at__lt=now)
        .order_by()
        .annotate(lo=bin_of("submitted_at"), hi=bin_of("finished_at"))
        .values_list("tenant_id", "lo", "hi")
        .distinct()
    )


def demand_bins(
    start: datetime,
    now: datetime,
    width_s: float,
    bins: int,
    first_active: Mapping[int, float | None],
    finished: Iterable[tuple[int, float, float]] | None = None,
) -> dict[int, list[bool]]:
    """``{tenant id: [had a pending or running job during bin k]}`` (a difference array per
    tenant: +1 in the bin where a job's life in the queue or on GPUs begins, −1 after the bin
    where it ends; now for a job still pending or running). ``first_active``: ``{tenant id:
    submission (epoch s) of its oldest pending or running job, or None}``; ``finished``: the rows
    of :func:`finished_bins` when already read (read here otherwise)."""
    start_s = start.timestamp()
    diffs: dict[int, list[int]] = {}

    def mark(tenant_id: int, lo: float, hi: float) -> None:
        diff = diffs.setdefault(tenant_id, [0] * (bins + 1))
        diff[min(bins - 1, max(0, int(lo)))] += 1
        diff[min(bins, max(0, int(hi)) + 1)] -= 1

    for tenant_id, first in first_active.items():
        if first is not None:
            mark(tenant_id, (first - start_s) // width_s, bins - 1)
    # finished jobs: only the distinct (tenant, first bin, last bin) triples leave the database
    for tenant_id, lo, hi in raw_rows(finished_bins(start, now, width_s)) if finished is None else finished:
        mark(tenant_id, lo, hi)
    demand = {}
    for tenant_id, diff in diffs.items():
        level, flags = 0, []
        for k in range(bins):
            level += diff[k]
            flags.append(level > 0)
        demand[tenant_id] = flags
    return demand
