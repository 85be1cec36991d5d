"""A tenant's charge so far as a piecewise-linear function of time (pure Python).

``F(x) = Σ rate · |[lo, hi] ∩ (−∞, x]|`` over charge segments ``(lo, hi, rate)`` (s, s, GPU-s per
second): the GPU-seconds charged up to ``x``. The charge of any interval ``[a, b]`` is then
``F(b) − F(a)``, two binary searches, whatever the number of segments. The dashboard keeps one
per tenant for the placements whose charge can no longer change (docs/PERFORMANCE.md,
"Dashboard"), so bins whose edges slide with "now" cost O(bins · log segments) per request
instead of one pass over every segment of the window.

Units: seconds (s), GPU-seconds (GPU-s).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections.abc import Iterable


class Cumulative:
    """``F`` of a set of charge segments (module docstring); immutable once built.

    ``times``: the distinct segment edges, ascending (s); ``values``: ``F`` at each of them
    (GPU-s); ``slopes``: the summed rate of the segments open just after each (GPU-s per s).
    """

    __slots__ = ("times", "values", "slopes")

    def __init__(self, segments: Iterable[tuple[float, float, float]]) -> None:
        """Build ``F`` from ``(lo, hi, rate)`` segments (``hi`` may be ``math.inf``: still open);
        those with ``hi ≤ lo`` or rate 0 add nothing. Cost O(n log n) for n segments."""
        change: dict[float, float] = {}
        for lo, hi, rate in segments:
            if hi > lo and rate:
                change[lo] = change.get(lo, 0.0) + rate
                if hi != math.inf:  # a segment still open is charged for ever after
                    change[hi] = change.get(hi, 0.0) - rate
        self.times = array("d", sorted(change))
        self.values = array("d")
        self.slopes = array("d")
        value, slope, last = 0.0, 0.0, 0.0
        for t in self.times:
            value += slope * (t - last) if self.values else 0.0
            slope += change[t]
            self.values.append(value)
            self.slopes.append(slope)
            last = t

    def at(self, x: float) -> float:
        """``F(x)``: GPU-s charged up to ``x`` (s); 0 before the first segment."""
        i = bisect_right(self.times, x) - 1
        if i < 0:
            return 0.0
        return self.values[i] + self.slopes[i] * (x - self.times[i])

    def bins(self, start_s: float, width_s: float, n: int) -> list[float]:
        """GPU-s charged in each of ``n`` bins of ``width_s`` s from ``start_s``: ``F(e_{k+1}) −
        F(e_k)``, ``e_k = start_s + k · width_s``; never negative (a difference of two roundings
        of a non-decreasing ``F`` may be −1e-12: read as 0)."""
        if not self.times:
            return [0.0] * n
        edges = [self.at(start_s + k * width_s) for k in range(n + 1)]
        out = []
        for a, b in zip(edges, edges[1:], strict=False):
            d = b - a
            out.append(d if d > 0 else 0.0)
        return out
