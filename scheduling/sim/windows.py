"""Windowed GPU-hours and a windowed fairness figure in the simulator's report (docs/FAIRNESS.md §4).

A per-run Jain's index can read 1.000 while one tenant gets twice another's GPU-time for hours on
end. With ``--windows 2h,24h`` the simulator records each tenant's charged GPU-time (normalised
split, :mod:`scheduling.core.charge`) in bins (:class:`~scheduling.core.usage.UsageLedger`) and the
report adds, per policy and window length, under ``"fairness"``::

    "windows": {"7200": {"step_s", "compared", "jain_min", "jain_mean", "max_ratio",
                         "within_15pct", "starts_s": [...], "gpu_hours": {TENANT: [...]}}}

Sliding windows every ``step_s`` (a quarter of the window, at least one bin) over ``[0, last
completion]``. A window *compares* the tenants with work in it (a job submitted and not finished
for at least half of the window, :func:`~scheduling.core.usage.active_tenants`) — with quotas
those with a guarantee — when there are at least two: ``jain_min``/``jain_mean`` of Jain's index of
``GPU-hours ÷ g_t`` over those windows, ``max_ratio`` the largest ``max/min`` of those shares, and
``within_15pct`` the fraction of compared windows whose shares are within ±15 % of each other
(``max/min ≤ 1.15``). ``starts_s``/``gpu_hours``: back-to-back windows (one every window length),
each tenant's GPU-hours in each. Times in s.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from scheduling.core.types import TenantQuota
from scheduling.core.usage import active_tenants, window_fairness
from scheduling.sim.result import SimResult

#: Bin width (s) of the usage ledger: windows are whole bins (10 min).
DEFAULT_BIN_S = 600.0
#: The ±15 % target of issue 11 (two demanding tenants with equal guarantees).
WITHIN = 1.15

_UNIT_S = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}
_WINDOW_RE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>[smhd]?)\s*$")


def parse_windows(text: str) -> tuple[float, ...]:
    """``"2h,24h"`` → ``(7200.0, 86400.0)``: comma-separated lengths, each a number with an
    optional unit ``s``, ``m``, ``h`` or ``d`` (no unit: seconds). Raises ``ValueError`` for an
    empty list, a malformed item or a length below one bin (600 s)."""
    out: list[float] = []
    for item in text.split(","):
        match = _WINDOW_RE.match(item)
        if match is None:
            raise ValueError(f"window {item.strip()!r} is not a length such as 2h, 90m or 7200")
        seconds = float(match["n"]) * _UNIT_S[match["unit"]]
        if seconds < DEFAULT_BIN_S:
            raise ValueError(f"window {item.strip()!r} is shorter than one bin of {DEFAULT_BIN_S:g} s")
        out.append(seconds)
    return tuple(sorted(set(out)))


def windows_summary(
    result: SimResult, quotas: Mapping[str, TenantQuota], windows_s: Sequence[float]
) -> dict[str, Any]:
    """The ``"windows"`` entry of one policy (module docstring); ``{}`` when the run recorded no
    usage (``SimConfig.usage_bin_s`` unset)."""
    ledger = result.usage
    if ledger is None or not windows_s:
        return {}
    end = max((o.end_time for o in result.outcomes), default=0.0)
    spans = [(o.tenant, o.submit_time, o.end_time) for o in result.outcomes]
    guarantees = {t: q.guaranteed_gpus for t, q in quotas.items()}
    tenants = sorted(ledger.bins)
    out: dict[str, Any] = {}
    for window_s in windows_s:
        step = max(ledger.bin_s, window_s / 4)
        jains: list[float] = []
        ratios: list[float] = []
        for w in ledger.windows(window_s, end, step):
            active = active_tenants(spans, w.start_s, w.end_s)
            if guarantees:
                active = {t for t in active if guarantees.get(t, 0) > 0}
            if len(active) < 2:
                continue
            jain, ratio = window_fairness(w.gpu_hours, guarantees, active)
            jains.append(jain)
            ratios.append(ratio)
        tumbling = ledger.windows(window_s, end, window_s)
        out[f"{window_s:g}"] = {
            "step_s": step,
            "compared": len(jains),
            "jain_min": min(jains, default=math.nan),
            "jain_mean": sum(jains) / len(jains) if jains else math.nan,
            "max_ratio": max(ratios, default=math.nan),
            "within_15pct": sum(r <= WITHIN for r in ratios) / len(ratios) if ratios else math.nan,
            "starts_s": [w.start_s for w in tumbling],
            "gpu_hours": {t: [round(w.gpu_hours.get(t, 0.0), 4) for w in tumbling] for t in tenants},
        }
    return out


def format_window_table(report: Mapping[str, Any]) -> str:
    """Per policy and window: compared windows, Jain min and mean, worst max/min share ratio and
    the fraction of windows within ±15 % (``-`` where no window compared two tenants)."""
    lines = [
        f"{'windowed fairness':<18} {'window':>7} {'compared':>8} {'Jain min':>8} {'Jain mean':>9} "
        f"{'max/min':>8} {'within 15%':>10}"
    ]

    def num(value: Any, fmt: str) -> str:
        return "-" if value is None else fmt.format(value)

    for name, summary in report["policies"].items():
        for window, w in summary["fairness"].get("windows", {}).items():
            lines.append(
                f"{name:<18} {float(window) / 3600:>6g}h {w['compared']:>8d} "
                f"{num(w['jain_min'], '{:.3f}'):>8} "
                f"{num(w['jain_mean'], '{:.3f}'):>9} {num(w['max_ratio'], '{:.2f}'):>8} "
                f"{num(w['within_15pct'], '{:.0%}'):>10}"
            )
    return "\n".join(lines)
