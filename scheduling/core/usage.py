"""Tenants' GPU-hours over sliding windows, charged by the normalised split (pure Python).

docs/FAIRNESS.md §3–4 **(ours)**. A GPU held by one job charges it 1 GPU-s per second; a GPU
shared by jobs ``a`` and ``b`` charges ``a`` the share ``ξ_b / (ξ_a + ξ_b)`` of each second and
``b`` the rest (:func:`scheduling.core.fairness.charge_rates`), so the GPU-hours of all tenants add
up to the busy GPU-hours. A per-run figure (Jain's index over a whole trace) can read 1.000 while
one tenant gets twice the other's GPU-time for hours on end; the windows here show it.

Two ways in, one rule:

- :func:`charge_segments` + :func:`gpu_hours_between`, for a service that knows its placements'
  intervals (start, end, GPUs) and each pair's slowdown: "the last 2 h" is
  ``gpu_hours_between(segments, now − 7200, now)``;
- :class:`UsageLedger`, for the simulator, which charges each job's rate as time passes into fixed
  bins (memory: one float per tenant per bin), then reads sliding windows off the bins
  (:meth:`UsageLedger.windows`).

:func:`window_fairness` turns one window's GPU-hours into the windowed fairness figure.
Times in seconds (s), GPU-time in GPU-seconds (GPU-s) unless a name says hours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduling.core.charge import charge_rates
from scheduling.core.metrics import jain_index
from scheduling.core.types import JobId


@dataclass(frozen=True, slots=True)
class Interval:
    """One placement of one job: ``gpu_ids`` held from ``start_s`` to ``end_s`` (s)."""

    job_id: JobId
    tenant: str
    gpu_ids: tuple[int, ...]
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class ChargeSegment:
    """``tenant`` is charged ``rate`` GPU-s per second from ``start_s`` to ``end_s`` (s)."""

    tenant: str
    start_s: float
    end_s: float
    rate: float


def charge_segments(
    intervals: Iterable[Interval], pair_slowdown: Callable[[JobId, JobId], float]
) -> list[ChargeSegment]:
    """The charge of every placement, cut where the jobs on any of its GPUs change.

    ``pair_slowdown(a, b)``: ``ξ_a`` of job ``a`` while it shares a GPU with ``b`` (called only for
    jobs that overlap on a GPU; a service without a measured ξ may pass ``lambda a, b: 1.0``, the
    even ½/½ split). Between two consecutive change points of a GPU the jobs on it are fixed and
    :func:`~scheduling.core.fairness.charge_rates` gives each its rate there; a placement's
    segment sums its rates over its GPUs. Intervals with ``end_s ≤ start_s`` (a placement that
    ends before its recorded start, say) charge nothing. Raises ``ValueError`` when a GPU holds
    more than two jobs at once.
    Cost: O(P log P) for P placements: each GPU is swept on its own (a GPU's split depends only
    on the jobs on it), so a placement is cut only where the jobs on its own GPUs change, never
    at every change point of the cluster (that was O(E · J), quadratic on a busy cluster).
    """
    out = [seg for own in placement_segments(list(intervals), pair_slowdown) for seg in own]
    out.sort(key=lambda seg: seg.start_s)
    return out


def placement_segments(
    intervals: Sequence[Interval], pair_slowdown: Callable[[JobId, JobId], float]
) -> list[list[ChargeSegment]]:
    """Per interval of ``intervals`` (same order), its charge segments in time order, an empty
    list for one with ``end_s ≤ start_s``: :func:`charge_segments` before its sort by start, so a
    caller that charges part of a cluster at a time (one GPU's intervals, say: a GPU's split
    depends only on the jobs on it) can put the parts in :func:`charge_segments`' order. Raises
    ``ValueError`` when a GPU holds more than two jobs at once."""
    index = [i for i, iv in enumerate(intervals) if iv.end_s > iv.start_s]
    alive = [intervals[i] for i in index]
    on_gpu: dict[int, list[int]] = {}
    for i, iv in enumerate(alive):
        for g in iv.gpu_ids:
            on_gpu.setdefault(g, []).append(i)
    # per placement: (lo, hi, rate) pieces, one sweep per GPU
    pieces: dict[int, list[tuple[float, float, float]]] = {}
    for members in on_gpu.values():
        for i, lo, hi, rate in _gpu_pieces(alive, members, pair_slowdown):
            pieces.setdefault(i, []).append((lo, hi, rate))
    out: list[list[ChargeSegment]] = [[] for _ in intervals]
    for i, own in pieces.items():
        tenant = alive[i].tenant
        out[index[i]] = [ChargeSegment(tenant, lo, hi, rate) for lo, hi, rate in _summed(own)]
    return out


def _gpu_pieces(
    alive: Sequence[Interval], members: Sequence[int], pair_slowdown: Callable[[JobId, JobId], float]
) -> list[tuple[int, float, float, float]]:
    """``(placement index, lo, hi, rate)`` on one GPU held by the placements ``alive[i]`` for ``i``
    in ``members``: between consecutive change points of this GPU, each holder's
    :func:`~scheduling.core.charge.charge_rates` share. Raises ``ValueError`` for three at once."""
    by_start = sorted(members, key=lambda i: alive[i].start_s)
    if all(alive[i].end_s <= alive[j].start_s for i, j in zip(by_start, by_start[1:], strict=False)):
        # one holder at a time (the common case): each placement alone for its whole span
        return [(i, alive[i].start_s, alive[i].end_s, 1.0) for i in by_start]
    times = sorted({t for i in members for t in (alive[i].start_s, alive[i].end_s)})
    out: list[tuple[int, float, float, float]] = []
    holding: list[int] = []
    k = 0
    for lo, hi in zip(times, times[1:], strict=False):
        while k < len(by_start) and alive[by_start[k]].start_s <= lo:
            holding.append(by_start[k])
            k += 1
        holding = [i for i in holding if alive[i].end_s > lo]
        if not holding:
            continue
        rates = charge_rates([[alive[i].job_id for i in holding]], pair_slowdown)
        out.extend((i, lo, hi, rates[alive[i].job_id]) for i in holding)
    return out


def _summed(own: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """One placement's pieces from all its GPUs as ``(lo, hi, summed rate)``, cut at every piece
    edge (one GPU's pieces pass through as they are)."""
    if len(own) == 1:
        return own
    edges = sorted({t for lo, hi, _ in own for t in (lo, hi)})
    out: list[tuple[float, float, float]] = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        rate = sum(r for a, b, r in own if a <= lo and b >= hi)
        if rate:
            out.append((lo, hi, rate))
    return out


def gpu_hours_between(segments: Iterable[ChargeSegment], lo_s: float, hi_s: float) -> dict[str, float]:
    """Tenant → GPU-hours charged within ``[lo_s, hi_s]`` (s), tenants sorted; a segment counts
    for the part of it inside the window. Raises ``ValueError`` for ``hi_s < lo_s``."""
    if hi_s < lo_s:
        raise ValueError(f"a window must not end before it starts, got [{lo_s}, {hi_s}]")
    used: dict[str, float] = {}
    for seg in segments:
        overlap = min(seg.end_s, hi_s) - max(seg.start_s, lo_s)
        if overlap > 0:
            used[seg.tenant] = used.get(seg.tenant, 0.0) + seg.rate * overlap / 3600.0
    return dict(sorted(used.items()))


class UsageLedger:
    """GPU-seconds charged per tenant in bins of ``bin_s`` seconds, bin ``k`` covering
    ``[k·bin_s, (k+1)·bin_s)``; mutable. Windows that start and end on bin edges are exact.
    Raises ``ValueError`` for a non-positive or non-finite ``bin_s``."""

    def __init__(self, bin_s: float = 600.0) -> None:
        if not (math.isfinite(bin_s) and bin_s > 0):
            raise ValueError(f"bin width must be a positive number of seconds, got {bin_s}")
        self.bin_s = bin_s
        self.bins: dict[str, list[float]] = {}

    def charge(self, tenant: str, start_s: float, end_s: float, rate: float) -> None:
        """Charge ``tenant`` ``rate`` GPU-s per second over ``[start_s, end_s)`` (s, ≥ 0)."""
        if end_s <= start_s or rate == 0:
            return
        row = self.bins.setdefault(tenant, [])
        k = int(start_s // self.bin_s)
        t = start_s
        while t < end_s:
            edge = min(end_s, (k + 1) * self.bin_s)
            if len(row) <= k:
                row.extend([0.0] * (k + 1 - len(row)))
            row[k] += rate * (edge - t)
            t, k = edge, k + 1

    def windows(self, window_s: float, end_s: float, step_s: float | None = None) -> list[Window]:
        """Sliding windows of ``window_s`` over ``[0, end_s]``, one every ``step_s`` (default: the
        bin width); the first ends at ``window_s`` (a run shorter than one window: one window
        ``[0, end_s]``). Both rounded to whole bins (at least one). Each window's GPU-hours per
        tenant that has a bin (0 where it was charged nothing in the window)."""
        per = max(1, round(window_s / self.bin_s))
        step = max(1, round((step_s if step_s is not None else self.bin_s) / self.bin_s))
        n_bins = max(1, math.ceil(end_s / self.bin_s - 1e-9))
        starts = range(0, max(1, n_bins - per + 1), step)
        out: list[Window] = []
        for k in starts:
            hi = min(k + per, n_bins)
            hours = {t: sum(row[k:hi]) / 3600.0 for t, row in sorted(self.bins.items())}
            out.append(Window(k * self.bin_s, hi * self.bin_s, hours))
        return out


@dataclass(frozen=True, slots=True)
class Window:
    """One window ``[start_s, end_s]`` (s) and each tenant's GPU-hours charged in it."""

    start_s: float
    end_s: float
    gpu_hours: Mapping[str, float]


def window_fairness(
    gpu_hours: Mapping[str, float], guarantees: Mapping[str, int], active: Iterable[str] | None = None
) -> tuple[float, float]:
    """``(Jain's index, max/min ratio)`` of one window's shares ``x_t = GPU-hours_t ÷ g_t``.

    Over the ``active`` tenants (default: every tenant in ``guarantees``) with ``g_t > 0``; with no
    guarantees at all (an empty mapping), ``x_t`` = GPU-hours over the active tenants. The ratio
    ``max x / min x`` is 1 for equal shares and ``inf`` when an active tenant got nothing while
    another got something. ``(nan, nan)`` with no tenant to compare. Jain: Jain, Chiu & Hawe 1984
    (:func:`scheduling.core.metrics.jain_index`).
    """
    names = list(guarantees) if active is None else list(active)
    if guarantees:
        xs = [gpu_hours.get(t, 0.0) / guarantees[t] for t in names if guarantees.get(t, 0) > 0]
    else:
        xs = [gpu_hours.get(t, 0.0) for t in names]
    if not xs:
        return math.nan, math.nan
    top, low = max(xs), min(xs)
    ratio = 1.0 if top == 0 else (top / low if low > 0 else math.inf)
    return jain_index(xs), ratio


def active_tenants(spans: Iterable[tuple[str, float, float]], lo_s: float, hi_s: float) -> set[str]:
    """Tenants with work in ``[lo_s, hi_s]``: a ``(tenant, submit_s, end_s)`` span of one of its
    jobs (submitted, not yet finished) overlaps the window for at least half of it — a tenant
    that only arrives at a window's end had no chance to use it."""
    need = (hi_s - lo_s) / 2
    covered: dict[str, list[tuple[float, float]]] = {}
    for tenant, a, b in spans:
        lo, hi = max(a, lo_s), min(b, hi_s)
        if hi > lo:
            covered.setdefault(tenant, []).append((lo, hi))
    out: set[str] = set()
    for tenant, parts in covered.items():
        if _union_length(parts) >= need:
            out.add(tenant)
    return out


def active_tenants_over(
    spans: Iterable[tuple[str, float, float]], hi_s: float, windows_s: Sequence[float]
) -> list[set[str]]:
    """:func:`active_tenants` of each window ``[hi_s − w, hi_s]`` (``w`` in ``windows_s``, s), in
    one pass: each tenant's spans within the longest window are merged once (O(n log n)), then a
    window's covered length is read off the merged runs. Equal to ``[active_tenants(spans,
    hi_s − w, hi_s) for w in windows_s]``."""
    if not windows_s:
        return []
    lo_s = hi_s - max(windows_s)
    per_tenant: dict[str, list[tuple[float, float]]] = {}
    for tenant, a, b in spans:
        lo, hi = max(a, lo_s), min(b, hi_s)
        if hi > lo:
            per_tenant.setdefault(tenant, []).append((lo, hi))
    runs: dict[str, list[tuple[float, float]]] = {}
    for tenant, parts in per_tenant.items():
        merged: list[tuple[float, float]] = []
        for lo, hi in sorted(parts):
            if merged and lo <= merged[-1][1]:
                if hi > merged[-1][1]:
                    merged[-1] = (merged[-1][0], hi)
            else:
                merged.append((lo, hi))
        runs[tenant] = merged
    out = []
    for window in windows_s:
        start, need = hi_s - window, window / 2
        out.append(
            {
                tenant
                for tenant, merged in runs.items()
                if sum(hi - max(lo, start) for lo, hi in merged if hi > start) >= need
            }
        )
    return out


def _union_length(parts: Sequence[tuple[float, float]]) -> float:
    total, end = 0.0, -math.inf
    for lo, hi in sorted(parts):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total
