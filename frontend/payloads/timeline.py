"""The timeline endpoint: a Gantt chart of jobs on GPUs over a window, shared intervals hatched."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from frontend.payloads import timeline_rows
from frontend.payloads.clock import TimeScale, time_scale
from frontend.payloads.common import HIDDEN, Viewer, job_label, payload, table
from scheduling import figures

MAX_BARS = 2000
MAX_TABLE_ROWS = 500


def timeline_payload(viewer: Viewer, window_s: int, *, cached: bool = True) -> dict[str, Any]:
    """Gantt of jobs on GPUs over the last ``window_s`` seconds (of trace time during a replay,
    :mod:`frontend.payloads.clock`), shared intervals hatched.

    A tenant's member sees the GPUs their jobs used, with any co-located job of another tenant
    drawn anonymously (it explains the slowdown). At most :data:`MAX_BARS` bars: running
    placements first, then by latest end; the table lists the first :data:`MAX_TABLE_ROWS`.
    ``cached``: the placements from this process's kept rows
    (:func:`frontend.payloads.timeline_rows.placements`, the same body); ``False``: read afresh.
    """
    now = timezone.now()
    scale = time_scale()
    start = scale.window_start(now, window_s)
    if cached:
        placements, total = timeline_rows.placements(start, now, window_s, viewer.tenant_id, limit=MAX_BARS)
    else:
        placements, total = timeline_rows.placements_afresh(start, now, viewer.tenant_id, limit=MAX_BARS)
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
    """The Gantt bars of ``placements`` (:data:`frontend.payloads.timeline_rows.Placed` rows) as
    ``viewer`` may see them, as columns per tenant (``None``: other tenants' jobs; the input of
    :func:`scheduling.figures.timeline_spec`), times as ``scale`` shows them, and the table's rows
    of the first :data:`MAX_TABLE_ROWS`."""
    at, per_s = scale.at, scale.speedup  # shown seconds per wall second
    admin, own = viewer.is_admin, viewer.tenant_id
    # each moment formatted once: every running bar ends now, many begin at the same instant
    shown = {t: at(t) for t in {p[6] for p in placements} | {p[7] for p in placements}}
    # the bars of each trace in their order (a trace per tenant seen, in order of first bar; None:
    # other tenants' jobs), then each column built in one pass (viewer.sees inlined: 2,000 bars)
    traces: dict[str | None, list[tuple]] = {}
    for p in placements:
        key = p[5] if admin or p[4] == own else None
        members = traces.get(key)
        if members is None:
            traces[key] = [p]
        else:
            members.append(p)
    bars: dict[str | None, dict[str, list[Any]]] = {}
    for key, members in traces.items():
        bars[key] = {
            "gpu": [p[0] for p in members],
            "slot": [p[1] for p in members],
            "label": [job_label(p[2], p[3]) for p in members] if key is not None else [HIDDEN] * len(members),
            "start": [shown[p[6]] for p in members],
            "end": [shown[p[7]] for p in members],
            "duration_ms": [round((p[7] - p[6]) * per_s * 1000) for p in members],
        }
    rows: list[list[Any]] = []
    for gpu, _, job_id, name, tenant_id, tenant, begin, end in placements[:MAX_TABLE_ROWS]:
        visible = admin or tenant_id == own
        rows.append(
            [
                gpu,
                job_label(job_id, name) if visible else HIDDEN,
                tenant if visible else "another tenant",
                shown[begin],
                shown[end],
                round((end - begin) * per_s),
            ]
        )
    return bars, rows


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
