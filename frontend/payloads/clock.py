"""Which time the dashboard shows: wall-clock time (UTC dates, seconds), or — while a trace is
replayed faster than real time (``manage.py demo``, a :class:`scheduling.models.TraceClock` row)
— trace time, so that every axis, duration and window is in the trace's seconds and the
dashboard's figures are the terminal's (mean JCT included).

One :class:`TimeScale` per request (:func:`time_scale`, one small query); every payload that shows
a time converts through it: moments with :meth:`TimeScale.at`, durations with
:meth:`TimeScale.seconds` (GPU-hours too), a ``window`` parameter with
:meth:`TimeScale.window_start` and :meth:`TimeScale.window_words`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from typing import Any

from django.db import connection

from cluster.compiled import meta
from scheduling.figures import DATE_AXIS
from scheduling.models import TraceClock


@dataclass(frozen=True, slots=True)
class TimeScale:
    """Wall ↔ shown time. ``speedup``: trace seconds per wall second (1 for wall time);
    ``trace_origin_s``: the trace time (s) at ``wall_origin_s`` (epoch s); ``None``: wall time."""

    speedup: float = 1.0
    trace_origin_s: float | None = None
    wall_origin_s: float = 0.0
    trace: str = ""

    @property
    def is_trace(self) -> bool:
        """Whether times are trace time (a replay is running or ran)."""
        return self.trace_origin_s is not None

    @property
    def unit(self) -> str:
        """The unit of a shown duration: ``"s"`` or ``"trace s"``."""
        return "trace s" if self.is_trace else "s"

    @property
    def axis(self) -> dict[str, Any]:
        """The x axis of a chart over time: dates (UTC), or trace seconds."""
        if not self.is_trace:
            return dict(DATE_AXIS)
        return {"type": "linear", "title": {"text": f"trace time (s; replay at {self.speedup:g}x)"}}

    @property
    def note(self) -> str:
        """One sentence naming the time shown (empty for wall time)."""
        if not self.is_trace:
            return ""
        return (
            f"Times are trace time of {self.trace or 'the replayed trace'} in seconds "
            f"(replayed {self.speedup:g}x faster than real time), as the demo's terminal reports them."
        )

    def at(self, epoch_s: float) -> str | float:
        """A moment (epoch s) as shown: ISO 8601 UTC to the ms, or trace seconds (0.1 s)."""
        if self.trace_origin_s is None:
            return _iso(epoch_s)
        return round(self.trace_origin_s + (epoch_s - self.wall_origin_s) * self.speedup, 1)

    def at_dt(self, moment: datetime) -> str | float:
        """:meth:`at` of a datetime."""
        return self.at(moment.timestamp())

    def moment_words(self, moment: datetime) -> str:
        """A moment in words: ``"at 2026-12-01T14:02:03.456Z"`` or ``"at 1,234 s of trace time"``."""
        shown = self.at_dt(moment)
        return f"at {shown:,.0f} s of trace time" if isinstance(shown, float) else f"at {shown}"

    def seconds(self, wall_s: float) -> float:
        """A duration of ``wall_s`` wall seconds as shown (s of trace time in a replay), or any
        figure that is a duration times a count — GPU-seconds, GPU-hours (GPUs × a duration) —
        in the same unit (wall GPU-hours → GPU-hours of trace time): × ``speedup``."""
        return wall_s * self.speedup

    def window_start(self, now: datetime, window_s: float) -> datetime:
        """The start of the last ``window_s`` shown seconds before ``now``; in a replay never
        before the replay's start (so a chart over the window is not a sliver at its right edge)."""
        start = now - timedelta(seconds=window_s / self.speedup)
        if self.trace_origin_s is None:
            return start
        return max(start, datetime.fromtimestamp(self.wall_origin_s, UTC))

    def window_words(self, window_s: float) -> str:
        """``"60 min"`` or ``"60 min of trace time"``."""
        return self.of_time(f"{window_s / 60:g} min")

    def of_time(self, words: str) -> str:
        """A span named in ``words`` (``"last 2 h"``) as shown: the same words for wall time,
        ``"last 2 h of trace time"`` in a replay."""
        return words + (" of trace time" if self.is_trace else "")


@lru_cache(maxsize=8192)
def _iso(epoch_s: float) -> str:
    """ISO 8601 UTC of seconds since the epoch, to the millisecond (what Plotly's date axes
    parse); ``time.strftime`` is several times cheaper than ``datetime.isoformat`` here, and a
    round places all its jobs at one instant, so most values repeat (memoised)."""
    ms = round(epoch_s * 1000)
    whole, frac = divmod(ms, 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(whole))}.{frac:03d}Z"


def time_scale() -> TimeScale:
    """The time the dashboard shows now: the latest :class:`~scheduling.models.TraceClock`'s
    trace time, or wall time when there is none."""
    found = list(TraceClock.objects.raw(_latest_sql()))
    if not found:
        return TimeScale()
    clock = found[0]
    return TimeScale(clock.speedup, clock.trace_origin_s, clock.wall_origin.timestamp(), clock.trace)


@cache
def _latest_sql() -> str:
    """The newest trace clock row (highest id), every column: one plain statement, its SQL
    written once (every dashboard request asks; the ORM's compilation of ``order_by("-id")
    .first()`` cost more CPU than the database took to answer, docs/PERFORMANCE.md §6)."""
    q, clock = connection.ops.quote_name, meta(TraceClock)
    columns = ", ".join(q(f.column) for f in clock.concrete_fields)
    return f"SELECT {columns} FROM {q(clock.db_table)} ORDER BY {q(clock.pk.column)} DESC LIMIT 1"
