"""The charge of a window's open part (``closed_charge``: its open placement rows and the closed
rows charged with them), charged again only on the GPUs whose rows changed.

After a round the open part's rows differ from the last ones read in a few GPUs (a job ended, a
job placed), yet charging them all again (:func:`~scheduling.core.usage.charge_segments` of
every row, about 1,300 on a busy 1,024-GPU cluster) was most of a dashboard poll's CPU. A GPU's
split depends only on the jobs on it and on the slowdowns of their pairs
(:func:`~scheduling.core.usage.charge_segments`), so each GPU's segments are kept with a
*fingerprint*: the GPU's rows themselves and the slowdown the rows give each pair of its jobs
(compared with ``==``, never hashed). A GPU whose fingerprint is the same keeps its segments; the
others are charged again; the tenants' curves are then put together from every GPU's segments in
the order :func:`~scheduling.core.usage.charge_segments` gives them for all the rows at once,
so every float is summed in the same order and the curves are the same to the last bit.

Units: seconds (s), GPU-seconds (GPU-s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduling.core.cumulative import Cumulative
from scheduling.core.types import JobId
from scheduling.core.usage import placement_segments
from scheduling.service.gpu_hours import intervals_of, note_slowdown, pair_rule

# row: (id, job, tenant, gpu, begin_s, end_s | None, partner, measured ξ, predicted ξ)
Row = tuple[Any, ...]
# (start s, the interval's first row's begin s and id, span, piece, tenant, lo s, hi s, rate):
# sorted as tuples, the order charge_segments gives the segments of all rows (start, then the
# intervals in the order of their first row, then each interval's pieces)
KeyedSegment = tuple[float, float, int, int, int, int, float, float, float]


@dataclass(frozen=True, slots=True)
class GpuCharge:
    """One GPU's part of the open charge: ``fingerprint`` (its rows, oldest first, and per pair
    of its jobs the two slowdowns the rows note, ``None`` where none) and ``segments``
    (:data:`KeyedSegment`, the GPU's charge with its rows' open ones reaching for ever)."""

    fingerprint: tuple[Any, ...]
    segments: tuple[KeyedSegment, ...]


def open_curves(
    rows: Sequence[Row], kept: Mapping[int, GpuCharge]
) -> tuple[dict[int, Cumulative], dict[int, GpuCharge]]:
    """``{tenant id: Cumulative}`` of ``rows`` (oldest first: ``(begin_s, id)``; open rows
    charged for ever after) — the curves of :func:`~scheduling.core.usage.charge_segments` of
    :func:`~scheduling.service.gpu_hours.intervals_of` ``(rows, inf)``, float for float — and
    ``{gpu id: GpuCharge}`` of every GPU of ``rows``, taken from ``kept`` (an earlier call's)
    where the GPU's fingerprint is the same, charged again where not. Raises ``ValueError`` when
    a GPU holds more than two jobs at once."""
    xi: dict[tuple[JobId, JobId], float] = {}
    by_gpu: dict[int, list[Row]] = {}
    for r in rows:
        if r[6] is not None:  # a row with no partner notes no slowdown
            note_slowdown(xi, r[1], r[6], r[7], r[8])
        by_gpu.setdefault(r[3], []).append(r)
    rule = pair_rule(xi)
    parts: dict[int, GpuCharge] = {}
    for gpu, members in by_gpu.items():
        if len(members) == 1:
            fingerprint: tuple[Any, ...] = ((members[0],), ())  # one job: no pair (most GPUs)
        else:
            jobs = list(dict.fromkeys(r[1] for r in members))
            pairs = [(a, b) for k, a in enumerate(jobs) for b in jobs[k + 1 :]]
            fingerprint = (tuple(members), tuple((xi.get((a, b)), xi.get((b, a))) for a, b in pairs))
        old = kept.get(gpu)
        same = old is not None and old.fingerprint == fingerprint
        parts[gpu] = old if same and old is not None else _charged(members, fingerprint, rule)
    merged = sorted(seg for part in parts.values() for seg in part.segments)
    per_tenant: dict[int, list[tuple[float, float, float]]] = {}
    for segment in merged:
        per_tenant.setdefault(segment[5], []).append(segment[6:])  # (lo, hi, rate)
    return {t: Cumulative(segs) for t, segs in per_tenant.items()}, parts


def _charged(members: Sequence[Row], fingerprint: tuple[Any, ...], rule: Any) -> GpuCharge:
    """One GPU's rows charged (``rule``: the pair slowdown of all the rows)."""
    # an interval's place in charge_segments' order: its job's first row on this GPU that holds
    # it (an open row, or one that ends after it begins: intervals_of skips the others)
    first: dict[int, tuple[float, int]] = {}
    for r in members:
        if r[5] is None or r[5] > r[4]:
            first.setdefault(r[1], (r[4], r[0]))
    intervals, _ = intervals_of([r[1:] for r in members], math.inf, rule)
    spans: dict[int, int] = {}
    out: list[KeyedSegment] = []
    for interval, segments in zip(intervals, placement_segments(intervals, rule), strict=True):
        begin, row_id = first[interval.job_id]
        span = spans[interval.job_id] = spans.get(interval.job_id, -1) + 1
        out.extend(
            (s.start_s, begin, row_id, span, k, int(s.tenant), s.start_s, s.end_s, s.rate)
            for k, s in enumerate(segments)
        )
    return GpuCharge(fingerprint, tuple(out))
