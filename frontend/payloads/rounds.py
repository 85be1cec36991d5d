"""Recorded scheduling rounds as the dashboard reads them: a round's decisions are parsed once
per process (:class:`RoundView`, :func:`latest_rounds`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduling.models import Round
from scheduling.round_waits import wait_decisions


@dataclass(frozen=True, slots=True)
class RoundView:
    """A recorded round, pre-digested for the dashboard (decisions are parsed once per process).

    ``acts``: its ``start`` and ``preempt`` decisions (the dicts of ``Round.decisions``), in
    order; ``waits``: ``(job id, reason)`` of its ``wait`` decisions in the policy's order
    (``Round.waits``; in ``Round.decisions`` on older rows);
    ``slowdowns``: ``{job id: ξ}`` of both partners of every share it started;
    ``wait_order``: the job ids of ``waits``, each once (its first place), in order — the queue
    endpoint ranks 6,000 pending jobs by it on every poll; ``waits_read``: whether ``waits`` and
    ``wait_order`` were read (a view read without them, for a caller that needs only the starts,
    has both empty: :func:`latest_rounds`).
    """

    pk: int
    started_at: datetime
    policy: str
    duration_ms: float
    n_started: int
    n_waiting: int
    n_preempted: int
    acts: tuple[dict[str, Any], ...]
    waits: tuple[tuple[int, str], ...]
    slowdowns: dict[int, float]
    wait_order: tuple[int, ...]
    waits_read: bool = True

    @classmethod
    def of(
        cls,
        meta: Sequence[Any],
        decisions: Sequence[Mapping[str, Any]] | None,
        waits: Mapping[str, Any] | None = None,
        *,
        read_waits: bool = True,
    ) -> RoundView:
        """From ``(pk, started_at, policy, duration_ms, n_started, n_waiting, n_preempted)``, the
        round's ``decisions`` list and its packed ``waits`` (see ``scheduling.models.Round``; a
        row older than ``waits`` has its waits in ``decisions``). ``read_waits=False``: the wait
        decisions are left out (``waits_read`` false; ``waits`` is then not looked at)."""
        acts, slowdowns = [], {}
        for d in decisions or ():
            if d["action"] == "wait":
                continue
            acts.append(dict(d))
            for share in d.get("shares") or ():
                slowdowns[d["job_id"]] = share["xi_self"]
                slowdowns.setdefault(share["partner_id"], share["xi_partner"])
        pk, started_at, policy, duration_ms, n_started, n_waiting, n_preempted = meta
        waiting = tuple(wait_decisions(decisions, waits)) if read_waits else ()
        return cls(
            pk,
            started_at,
            policy,
            duration_ms,
            n_started,
            n_waiting,
            n_preempted,
            tuple(acts),
            waiting,
            slowdowns,
            tuple(dict.fromkeys(job_id for job_id, _ in waiting)),
            read_waits,
        )


_ROUND_FIELDS = ("id", "started_at", "policy", "duration_ms", "n_started", "n_waiting", "n_preempted")
_round_cache: OrderedDict[tuple[int, datetime], RoundView] = OrderedDict()
_round_cache_lock = threading.Lock()
ROUND_CACHE_SIZE = 128  # above the most rounds the decisions endpoint shows (100)


def forget() -> None:
    """Drop this process's parsed rounds (tests whose database repeats ids and moments)."""
    with _round_cache_lock:
        _round_cache.clear()


def round_summaries(limit: int) -> list[tuple]:
    """``(pk, started_at, policy, duration_ms, n_started, n_waiting, n_preempted)`` of the
    ``limit`` most recent rounds, newest first (empty while there are none)."""
    return list(Round.objects.order_by("-started_at", "-id").values_list(*_ROUND_FIELDS)[:limit])


def latest_rounds(
    limit: int, summaries: Sequence[tuple] | None = None, *, waits: bool = True
) -> list[RoundView]:
    """The ``limit`` most recent rounds as :class:`RoundView`, newest first. ``summaries``: the
    caller's :func:`round_summaries` of at least ``limit`` rounds (not read again), if any.
    ``waits=False``: a caller that needs only the starts and preemptions (the cluster map): views
    without their wait decisions will do, so a round not yet kept is read without its ``waits``
    column — at 6,000 waits, 2.6 of the 3.2 ms its read took, and 0.8 ms of parsing.

    A round's decisions never change once written (the scheduling service stores them with the
    row), so each is read and parsed once per process and kept in a small LRU cache keyed by
    ``(pk, started_at)``; a poll then costs one small query. A kept view without its waits is
    read again, whole, by the first caller that needs them, and replaces the kept one.
    """
    metas = round_summaries(limit) if summaries is None else list(summaries[:limit])
    views: dict[int, RoundView] = {}
    with _round_cache_lock:
        for meta in metas:
            cached = _round_cache.get((meta[0], meta[1]))
            if cached is not None and (cached.waits_read or not waits):
                _round_cache.move_to_end((meta[0], meta[1]))
                views[meta[0]] = cached
    missing = [m for m in metas if m[0] not in views]
    if missing:
        columns = ("id", "decisions", "waits") if waits else ("id", "decisions")
        stored = {
            row[0]: row[1:]
            for row in Round.objects.filter(pk__in=[m[0] for m in missing]).values_list(*columns)
        }
        with _round_cache_lock:
            for meta in missing:
                key = (meta[0], meta[1])
                row = stored.get(meta[0], (None, None))
                view = RoundView.of(meta, row[0], row[1] if waits else None, read_waits=waits)
                kept = _round_cache.get(key)
                if kept is not None and kept.waits_read and not waits:
                    view = kept  # another thread kept the whole view meanwhile: keep that one
                views[meta[0]] = _round_cache[key] = view
                _round_cache.move_to_end(key)
            while len(_round_cache) > ROUND_CACHE_SIZE:
                _round_cache.popitem(last=False)
    return [views[m[0]] for m in metas]
