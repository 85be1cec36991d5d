"""Schedule quality metrics (MODEL.md §5), pure functions of finished jobs and a GPU timeline.

Used by the simulator's report and by the service's dashboard; no I/O, no clock.

Definitions (all times in seconds):

- JCT of a job = ``end_time − submit_time``; percentiles by linear interpolation between
  closest ranks (the "linear" method of Hyndman & Fan type 7, NumPy's default), or, as the
  peers' ``calc.py`` reads its 99th percentile, the element at index ``int(n · q / 100)`` of the
  sorted values (``"index"``).
- Makespan = last end − first submit over the finished jobs.
- Queueing delay of a job = total time it spent pending: before its first start plus after
  every preemption (``queue_s``); the mean is over finished jobs.
- GPU utilisation = busy GPU-time ÷ (GPUs × makespan window); a GPU is busy while at least one
  job holds it (a job paying a restart cost holds its GPUs).
- Shared GPU-time fraction = GPU-time with two jobs ÷ busy GPU-time.
- GPU-hours of a tenant = the GPU-seconds charged to its jobs ÷ 3600, where a GPU shared by two
  jobs charges each half (invariant 7 of TESTING.md: never counted twice).
- Jain's fairness index (Jain, Chiu & Hawe, DEC-TR-301, 1984): ``(Σx)² / (n·Σx²)`` ∈ [1/n, 1].
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """One finished job as the metrics see it.

    ``gpus``: gang size; ``submit_time``/``first_start``/``end_time`` (s); ``queue_s``: total
    time pending (s); ``gpu_s``: GPU-seconds charged (a shared GPU-second counts ½);
    ``shared_s``: wall time (s) during which at least one of its GPUs was shared;
    ``preemptions``: times it was preempted.
    """

    job_id: int
    tenant: str
    gpus: int
    submit_time: float
    first_start: float
    end_time: float
    queue_s: float
    gpu_s: float
    shared_s: float = 0.0
    preemptions: int = 0

    @property
    def jct_s(self) -> float:
        """Job completion time ``end − submit`` (s)."""
        return self.end_time - self.submit_time


@dataclass(frozen=True, slots=True)
class TenantStats:
    """Per-tenant figures: finished jobs, mean JCT (s), GPU-hours charged."""

    jobs: int
    avg_jct_s: float
    gpu_hours: float


PERCENTILE_METHODS: tuple[str, ...] = ("linear", "index")
"""How :func:`percentile` reads a percentile: ``"linear"`` (ours) or ``"index"`` (the peers')."""


def percentile(values: Sequence[float], q: float, method: str = "linear") -> float:
    """The ``q``-th percentile (0 ≤ q ≤ 100) of ``values``.

    ``method="linear"``: linear interpolation (type 7), ``percentile([1, 2, 3, 4], 50) == 2.5``;
    ``method="index"``: ``sorted(values)[min(int(n · q / 100), n − 1)]`` as Muri's and Tiresias'
    ``calc.py`` compute their 99th JCT (``jct_list[int(cnt*0.99)]``), ``percentile([1, 2, 3,
    4], 50, "index") == 3``. Raises ``ValueError`` for no values, q outside [0, 100] or another
    method.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within [0, 100], got {q}")
    if method not in PERCENTILE_METHODS:
        raise ValueError(f"percentile method must be one of {', '.join(PERCENTILE_METHODS)}, got {method!r}")
    ordered = sorted(values)
    if method == "index":
        return ordered[min(int(len(ordered) * q / 100.0), len(ordered) - 1)]
    rank = (len(ordered) - 1) * q / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; ``nan`` for no values (an empty result is not an error in a report)."""
    total = 0.0
    n = 0
    for v in values:
        total += v
        n += 1
    return total / n if n else math.nan


def jct_summary(outcomes: Sequence[JobOutcome], method: str = "linear") -> dict[str, float]:
    """``{"avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s"}`` (s), percentiles by ``method``
    (:func:`percentile`); ``nan`` when no job finished."""
    jcts = [o.jct_s for o in outcomes]
    if not jcts:
        return dict.fromkeys(("avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s"), math.nan)
    return {
        "avg_jct_s": mean(jcts),
        "p50_jct_s": percentile(jcts, 50, method),
        "p95_jct_s": percentile(jcts, 95, method),
        "p99_jct_s": percentile(jcts, 99, method),
    }


def makespan_window(outcomes: Sequence[JobOutcome]) -> tuple[float, float]:
    """``(first submit, last end)`` (s) of the finished jobs; ``(0, 0)`` when there are none."""
    if not outcomes:
        return 0.0, 0.0
    return min(o.submit_time for o in outcomes), max(o.end_time for o in outcomes)


def makespan(outcomes: Sequence[JobOutcome]) -> float:
    """Last end − first submit (s); 0 when no job finished."""
    start, end = makespan_window(outcomes)
    return end - start


def mean_queueing_delay(outcomes: Sequence[JobOutcome]) -> float:
    """Mean total pending time per finished job (s); ``nan`` when there are none."""
    return mean(o.queue_s for o in outcomes)


def timeline_integrals(
    timeline: Sequence[tuple[float, int, int]], start: float, end: float
) -> tuple[float, float]:
    """``(busy GPU-s, shared GPU-s)`` within ``[start, end]`` of a step function.

    ``timeline``: ``(t, busy GPUs, shared GPUs)`` change points in increasing ``t``; each value
    holds until the next point (0 before the first).
    """
    busy = shared = 0.0
    for i, (t, n_busy, n_shared) in enumerate(timeline):
        t_next = timeline[i + 1][0] if i + 1 < len(timeline) else end
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            busy += n_busy * (hi - lo)
            shared += n_shared * (hi - lo)
    return busy, shared


def utilisation(
    timeline: Sequence[tuple[float, int, int]], capacity_gpus: int, start: float, end: float
) -> tuple[float, float]:
    """``(GPU utilisation, shared GPU-time fraction)`` over ``[start, end]`` (both in [0, 1]).

    Utilisation = busy GPU-s ÷ (``capacity_gpus`` × (end − start)); shared fraction = shared
    GPU-s ÷ busy GPU-s. Both 0 for an empty window or no busy time. Raises ``ValueError`` for
    ``capacity_gpus < 1``.
    """
    if capacity_gpus < 1:
        raise ValueError(f"capacity must be at least one GPU, got {capacity_gpus}")
    busy, shared = timeline_integrals(timeline, start, end)
    span = end - start
    util = busy / (capacity_gpus * span) if span > 0 else 0.0
    return util, (shared / busy if busy > 0 else 0.0)


def per_tenant(outcomes: Iterable[JobOutcome]) -> dict[str, TenantStats]:
    """Tenant → :class:`TenantStats`, tenants sorted by name."""
    jct: dict[str, list[float]] = {}
    gpu_s: dict[str, float] = {}
    for o in outcomes:
        jct.setdefault(o.tenant, []).append(o.jct_s)
        gpu_s[o.tenant] = gpu_s.get(o.tenant, 0.0) + o.gpu_s
    return {t: TenantStats(len(jct[t]), mean(jct[t]), gpu_s[t] / 3600.0) for t in sorted(jct)}


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index ``(Σx)² / (n·Σx²)`` of non-negative ``values``.

    1 when all are equal, 1/n when one value holds everything; ``nan`` for no values or an
    infinite one; 1 when all are 0 (nobody is favoured). Raises ``ValueError`` for a negative
    value. Values too large to square as floats are divided by the largest first (the index does
    not change with scale), so no finite input overflows.
    """
    xs = list(values)
    if not xs:
        return math.nan
    if any(x < 0 for x in xs):
        raise ValueError("Jain's index needs non-negative values")
    square_sum = sum(x * x for x in xs)
    if square_sum == 0:
        return 1.0
    if math.isfinite(square_sum):
        try:
            return sum(xs) ** 2 / (len(xs) * square_sum)
        except OverflowError:
            pass
    if not all(math.isfinite(x) for x in xs):
        return math.nan
    # Only past the float range: the plain formula above keeps every ordinary result bit-identical.
    top = max(xs)
    ys = [x / top for x in xs]
    return sum(ys) ** 2 / (len(ys) * sum(y * y for y in ys))


def summarise(
    outcomes: Sequence[JobOutcome],
    timeline: Sequence[tuple[float, int, int]],
    capacity_gpus: int,
    percentile_method: str = "linear",
) -> dict[str, object]:
    """The report's per-policy dict (JSON-ready; times in s, fractions in [0, 1]); percentiles
    by ``percentile_method`` (:func:`percentile`).

    Keys: ``jobs``, ``avg_jct_s``, ``p50_jct_s``, ``p95_jct_s``, ``p99_jct_s``, ``makespan_s``,
    ``avg_queue_s``, ``gpu_util``, ``shared_gpu_time_frac``, ``per_tenant``
    (``{tenant: {"jobs", "avg_jct_s", "gpu_hours"}}``) and ``jain_gpu_hours`` (Jain's index of
    the per-tenant GPU-hours). ``capacity_gpus``: healthy GPUs of the cluster.
    """
    start, end = makespan_window(outcomes)
    util, shared = utilisation(timeline, capacity_gpus, start, end)
    tenants = per_tenant(outcomes)
    return {
        "jobs": len(outcomes),
        **jct_summary(outcomes, percentile_method),
        "makespan_s": end - start,
        "avg_queue_s": mean_queueing_delay(outcomes),
        "gpu_util": util,
        "shared_gpu_time_frac": shared,
        "per_tenant": {
            t: {"jobs": s.jobs, "avg_jct_s": s.avg_jct_s, "gpu_hours": s.gpu_hours}
            for t, s in tenants.items()
        },
        "jain_gpu_hours": jain_index(s.gpu_hours for s in tenants.values()),
    }


def binned_utilisation(
    timeline: Sequence[tuple[float, int, int]], capacity_gpus: int, start: float, end: float, bins: int = 500
) -> tuple[list[float], list[float]]:
    """Mean GPU utilisation in ``bins`` equal slices of ``[start, end]``.

    Returns ``(slice start times (s), utilisation in [0, 1])``; both empty for an empty window.
    Used to draw utilisation over time without one point per event. Raises ``ValueError`` for
    ``capacity_gpus < 1`` or ``bins < 1``.
    """
    if capacity_gpus < 1 or bins < 1:
        raise ValueError(f"need capacity ≥ 1 GPU and ≥ 1 bin, got {capacity_gpus} and {bins}")
    if end <= start:
        return [], []
    width = (end - start) / bins
    busy = [0.0] * bins
    for i, (t, n_busy, _) in enumerate(timeline):
        t_next = timeline[i + 1][0] if i + 1 < len(timeline) else end
        lo, hi = max(t, start), min(t_next, end)
        if hi <= lo or n_busy == 0:
            continue
        b = min(int((lo - start) / width), bins - 1)
        while lo < hi:
            b_end = start + (b + 1) * width if b < bins - 1 else end
            step = min(hi, b_end) - lo
            busy[b] += n_busy * step
            lo += step
            b += 1
            if b >= bins:
                break
    times = [start + b * width for b in range(bins)]
    return times, [x / (capacity_gpus * width) for x in busy]


def cdf_points(values: Sequence[float], max_points: int = 1000) -> tuple[list[float], list[float]]:
    """Empirical CDF of ``values``: ``(sorted values, fraction ≤ value)``, thinned to at most
    ``max_points`` evenly spaced ranks (the last point, fraction 1, is always kept)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return [], []
    step = max(1, math.ceil(n / max_points))
    ranks = list(range(step - 1, n, step))
    if ranks[-1] != n - 1:
        ranks.append(n - 1)
    return [ordered[r] for r in ranks], [(r + 1) / n for r in ranks]
