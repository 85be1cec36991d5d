"""The timeline endpoint: a Gantt chart of jobs on GPUs over a window, shared intervals hatched."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Value
from django.db.models.functions import Coalesce, Greatest, Least
from django.utils import timezone

from cluster.expressions import EpochSeconds
from cluster.models import Placement
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
    placements, total = _window_placements(start, now, viewer.tenant_id, limit=MAX_BARS)
    dropped = max(0, total - len(placements))
    minutes = scale.window_words(window_s)
    if not placements:
        return payload(viewer, now, empty=f"No job held a GPU in the last {minutes}.")
    bars, rows = _bars_and_rows(placements, viewer, scale)
    at = scale.at
    intervals = shared_intervals(placements)
    shared: dict[str, list[Any]] = {
        "gpu": [g for g, _, _ in intervals],
        "start": [at(a) for _, a, _ in intervals],
        "end": [at(b) for _, _, b in intervals],
        "duration_ms": [_ms(scale, b - a) for _, a, b in intervals],
    }
    shared_s = sum(shared["duration_ms"]) / 1000
    n_shared = len(intervals)
    summary = (
        f"{len(placements)} placements on {len({p[0] for p in placements})} GPUs in the last {minutes}; "
        f"{n_shared} shared interval{'' if n_shared == 1 else 's'} "
        f"({shared_s / 60:.1f} GPU-min shared)."
    )
    notes = [
        f"{dropped} placements that ended earlier not drawn." if dropped else "",
        f"First {len(rows)} of {len(placements)} listed (running first)."
        if len(rows) < len(placements)
        else "",
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
) -> tuple[dict[str | None, dict[str, list[Any]]], list[list[Any]]]:
    """The Gantt bars of ``placements`` (rows of :func:`_window_placements`) as ``viewer`` may see
    them, as columns per tenant (``None``: other tenants' jobs; the input of
    :func:`scheduling.figures.timeline_spec`), times as ``scale`` shows them, and the table's rows
    of the first :data:`MAX_TABLE_ROWS`."""
    bars: dict[str | None, dict[str, list[Any]]] = {}
    rows: list[list[Any]] = []
    at, per_s = scale.at, scale.speedup  # shown seconds per wall second
    admin, own = viewer.is_admin, viewer.tenant_id
    # each moment formatted once: every running bar ends now, many begin at the same instant
    shown: dict[float, Any] = {}
    for gpu, slot, job_id, name, tenant_id, tenant, begin, end in placements:
        visible = admin or tenant_id == own  # viewer.sees, inlined: 2,000 bars
        label = job_label(job_id, name) if visible else HIDDEN
        begin_at = shown.get(begin)
        if begin_at is None:
            begin_at = shown[begin] = at(begin)
        end_at = shown.get(end)
        if end_at is None:
            end_at = shown[end] = at(end)
        shown_s = (end - begin) * per_s
        key = tenant if visible else None
        columns = bars.get(key)
        if columns is None:
            columns = bars[key] = {c: [] for c in figures.BAR_COLUMNS}
        columns["gpu"].append(gpu)
        columns["slot"].append(slot)
        columns["label"].append(label)
        columns["start"].append(begin_at)
        columns["end"].append(end_at)
        columns["duration_ms"].append(round(shown_s * 1000))
        if len(rows) < MAX_TABLE_ROWS:
            rows.append(
                [gpu, label, tenant if visible else "another tenant", begin_at, end_at, round(shown_s)]
            )
    return bars, rows


def _window_placements(
    start: datetime, now: datetime, tenant_id: int | None = None, limit: int | None = None
) -> tuple[list[tuple], int]:
    """Placements that held a GPU during ``[start, now]``: ``(gpu label, slot, job id, job name,
    tenant id, tenant name, begin, end)``, times in seconds since the epoch clipped to the
    window (``end`` is now for an active placement), latest end first (running ones), then latest
    begin; at most ``limit`` of them (the database sorts and cuts), and how many there are in
    all. With ``tenant_id``: only on GPUs that a job of that tenant held in the window (with the
    other jobs on those GPUs)."""
    placements = placements_in_window(start, now)
    if tenant_id is not None:
        placements = placements.filter(
            gpu_id__in=placements_in_window(start, now).filter(job__tenant_id=tenant_id).values("gpu_id")
        )
    begin, end = Greatest("created_at", Value(start)), Coalesce(Least("ended_at", Value(now)), Value(now))
    order = (end.desc(), begin.desc(), "-id")
    chosen, sort_here = placements.order_by(*order), False
    if limit is not None:
        # the database sorts and cuts the narrow placement rows alone, then joins only those
        # kept to their jobs, GPUs, nodes and tenants: one statement, no ids sent back and forth
        chosen = Placement.objects.filter(pk__in=chosen.values("pk")[:limit])
        # PostgreSQL's epoch seconds are exact (µs), so Python can put the 2,000 joined rows back
        # in that order for less than the database sorting them again; SQLite's are to the ms
        sort_here = connection.vendor == "postgresql"
        if not sort_here:
            chosen = chosen.order_by(*order)
    rows = raw_rows(
        chosen.annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at")).values_list(
            "id",
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
    if sort_here:  # the order of `order`: latest clipped end, latest clipped begin, highest id
        rows.sort(
            key=lambda r: (hi if r[9] is None or r[9] > hi else r[9], r[8] if r[8] > lo else lo, r[0]),
            reverse=True,
        )
    labels: dict[tuple[str, int], str] = {}
    out = []
    for _, node, index, slot, job_id, name, tenant, tenant_name, b, e in rows:
        gpu = labels.get((node, index))
        if gpu is None:
            gpu = labels[(node, index)] = gpu_label(node, index)
        out.append(
            (
                gpu,
                slot,
                job_id,
                name,
                tenant,
                tenant_name,
                b if b > lo else lo,
                hi if e is None or e > hi else e,
            )
        )
    # counted apart only when cut (a window count in the query costs more than this)
    return out, placements.count() if limit is not None and len(out) == limit else len(out)


def shared_intervals(placements: Sequence[tuple]) -> list[tuple[str, float, float]]:
    """Intervals during which a GPU held two placements: ``(gpu label, start, end)`` (s).

    ``placements``: rows whose first field is the GPU label and last two the begin and end (s),
    as from the timeline's window query.
    """
    by_gpu: dict[str, list[tuple[float, float]]] = {}
    for p in placements:
        begin, end = p[-2], p[-1]
        if end > begin:
            spans = by_gpu.get(p[0])
            if spans is None:
                by_gpu[p[0]] = [(begin, end)]
            else:
                spans.append((begin, end))
    shared = []
    for gpu, spans in by_gpu.items():
        if len(spans) < 2:  # one placement shares with nobody (most GPUs)
            continue
        if len(spans) == 2:  # two share while both run (an end before a start at one instant)
            (b1, e1), (b2, e2) = spans
            since, until = max(b1, b2), min(e1, e2)
            if until > since:
                shared.append((gpu, since, until))
            continue
        spans.sort()
        latest_end = spans[0][1]
        for begin, end in spans[1:]:
            if begin < latest_end:  # overlaps an earlier one: swept below
                break
            latest_end = end
        else:  # one after another (a busy GPU's history): nothing shared
            continue
        events = [(begin, 1) for begin, _ in spans] + [(end, -1) for _, end in spans]
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
