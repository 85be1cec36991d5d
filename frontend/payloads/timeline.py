"""The timeline endpoint: a Gantt chart of jobs on GPUs over a window, shared intervals hatched."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from cluster.expressions import EpochSeconds
from common.shapes import gpu_label
from frontend.payloads.clock import TimeScale, time_scale
from frontend.payloads.common import (
    HIDDEN,
    Viewer,
    job_label,
    payload,
    placements_in_window,
    raw_rows,
    table,
)
from scheduling import figures

MAX_BARS = 2000
MAX_TABLE_ROWS = 500


def timeline_payload(viewer: Viewer, window_s: int) -> dict[str, Any]:
    """Gantt of jobs on GPUs over the last ``window_s`` seconds (of trace time during a replay,
    :mod:`frontend.payloads.clock`), shared intervals hatched.

    A tenant's member sees the GPUs their jobs used, with any co-located job of another tenant
    drawn anonymously (it explains the slowdown). At most :data:`MAX_BARS` bars: running
    placements first, then by latest end; the table lists the first :data:`MAX_TABLE_ROWS`.
    """
    now = timezone.now()
    scale = time_scale()
    start = scale.window_start(now, window_s)
    placements = _window_placements(start, now, viewer.tenant_id)
    placements.sort(key=lambda p: (p[7], p[6]), reverse=True)  # end = now for running ones
    dropped = max(0, len(placements) - MAX_BARS)
    placements = placements[:MAX_BARS]
    minutes = scale.window_words(window_s)
    if not placements:
        return payload(viewer, now, empty=f"No job held a GPU in the last {minutes}.")
    bars, rows = _bars_and_rows(placements, viewer, scale)
    shared: list[dict[str, Any]] = [
        {"gpu": g, "start": scale.at(a), "end": scale.at(b), "duration_ms": _ms(scale, b - a)}
        for g, a, b in shared_intervals(placements)
    ]
    shared_s = sum(s["duration_ms"] for s in shared) / 1000
    summary = (
        f"{len(bars)} placements on {len({b['gpu'] for b in bars})} GPUs in the last {minutes}; "
        f"{len(shared)} shared interval{'' if len(shared) == 1 else 's'} "
        f"({shared_s / 60:.1f} GPU-min shared)."
    )
    notes = [
        f"{dropped} placements that ended earlier not drawn." if dropped else "",
        f"First {len(rows)} of {len(bars)} listed (running first)." if len(rows) < len(bars) else "",
        scale.note,
    ]
    return payload(
        viewer,
        now,
        summary=summary,
        figures_={
            "timeline": figures.timeline_spec(bars, shared, _zoom(placements, start, now, scale), scale.axis)
        },
        tables={
            "timeline": table(
                ["GPU", "job", "tenant", "start", "end", scale.unit if scale.is_trace else "seconds"],
                rows,
                " ".join(n for n in notes if n),
            )
        },
    )


def _ms(scale: TimeScale, wall_s: float) -> int:
    """A duration of ``wall_s`` wall seconds in ms of the time shown."""
    return round(scale.seconds(wall_s) * 1000)


def _bars_and_rows(
    placements: Sequence[tuple], viewer: Viewer, scale: TimeScale
) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """The Gantt bars of ``placements`` (rows of :func:`_window_placements`) as ``viewer`` may see
    them, times as ``scale`` shows them, and the table's rows of the first :data:`MAX_TABLE_ROWS`."""
    bars: list[dict[str, Any]] = []
    rows: list[list[Any]] = []
    for gpu, slot, job_id, name, tenant_id, tenant, begin, end in placements:
        visible = viewer.sees(tenant_id)
        label = job_label(job_id, name) if visible else HIDDEN
        begin_at, end_at = scale.at(begin), scale.at(end)
        bars.append(
            {
                "gpu": gpu,
                "slot": slot,
                "tenant": tenant if visible else None,
                "label": label,
                "start": begin_at,
                "end": end_at,
                "duration_ms": _ms(scale, end - begin),
            }
        )
        if len(rows) < MAX_TABLE_ROWS:
            rows.append(
                [
                    gpu,
                    label,
                    tenant if visible else "another tenant",
                    begin_at,
                    end_at,
                    round(scale.seconds(end - begin)),
                ]
            )
    return bars, rows


def _window_placements(start: datetime, now: datetime, tenant_id: int | None = None) -> list[tuple]:
    """Placements that held a GPU during ``[start, now]``: ``(gpu label, slot, job id, job name,
    tenant id, tenant name, begin, end)``, times in seconds since the epoch clipped to the
    window (``end`` is now for an active placement). With ``tenant_id``: only on GPUs that a
    job of that tenant held in the window (with the other jobs on those GPUs)."""
    placements = placements_in_window(start, now)
    if tenant_id is not None:
        placements = placements.filter(
            gpu_id__in=placements_in_window(start, now).filter(job__tenant_id=tenant_id).values("gpu_id")
        )
    rows = raw_rows(
        placements.annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at")).values_list(
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
    return [
        (
            gpu_label(node, index),
            slot,
            job_id,
            name,
            tenant,
            tenant_name,
            max(begin, lo),
            hi if end is None else min(end, hi),
        )
        for node, index, slot, job_id, name, tenant, tenant_name, begin, end in rows
    ]


def shared_intervals(placements: Sequence[tuple]) -> list[tuple[str, float, float]]:
    """Intervals during which a GPU held two placements: ``(gpu label, start, end)`` (s).

    ``placements``: rows whose first field is the GPU label and last two the begin and end (s),
    as from the timeline's window query.
    """
    by_gpu: dict[str, list[tuple[float, int]]] = {}
    for gpu, *_, begin, end in placements:
        if end > begin:
            by_gpu.setdefault(gpu, []).extend(((begin, 1), (end, -1)))
    shared = []
    for gpu, events in by_gpu.items():
        if len(events) < 4:
            continue
        events.sort()  # at the same instant an end (-1) sorts before a start (+1)
        held, since = 0, None
        for moment, change in events:
            held += change
            if held >= 2 and since is None:
                since = moment
            elif held < 2 and since is not None:
                if moment > since:
                    shared.append((gpu, since, moment))
                since = None
    return shared


def _zoom(placements: Sequence[tuple], start: datetime, now: datetime, scale: TimeScale) -> tuple[Any, Any]:
    """The timeline's x range (as ``scale`` shows times): from just before the earliest bar (not
    the window's start, so a young cluster's bars are not slivers at the right edge; at least 1
    min of wall time) to now."""
    first = min(p[6] for p in placements)
    span = max((now.timestamp() - first) * 1.05, 60.0)
    return scale.at(max(start.timestamp(), now.timestamp() - span)), scale.at(now.timestamp())
