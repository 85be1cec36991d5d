"""Why each pending job waits and when it may start, as the latest round left it.

A round records every ``wait`` decision with the policy's reason (``Round.waits``, packed by
:mod:`scheduling.round_waits`; what the dashboard's queue shows) and, for a non-preemptive
policy, the estimated start of the first
:data:`~scheduling.core.eta.MAX_ESTIMATED_JOBS` waiting jobs (``Round.estimated_starts``,
:func:`estimates_for`; the method is :mod:`scheduling.core.eta`). A round that repeats the last
recorded one is not stored again, but its fresh estimates replace the stored ones, so they follow
the clock. :func:`waiting_details` reads both for the API.

Units: seconds (s); estimates are POSIX timestamps (s).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from scheduling.core import types as core
from scheduling.core.eta import estimate_mode, estimated_starts
from scheduling.models import Round
from scheduling.round_waits import wait_decisions
from scheduling.service.snapshot import ClusterState

#: What a pending job no round has looked at yet is said to wait for (the dashboard's words).
NOT_YET_CONSIDERED = "not yet considered"

#: Where the estimates the API can state end (POSIX s, excluded): 10000-01-01T00:00:00Z, the
#: first moment no ``datetime`` holds. A job behind one of the longest a tenant may submit (10⁸
#: iterations of a day each) is estimated to start some 270,000 years from now; such an
#: estimate is no estimate (its ``datetime`` raised ``ValueError``: every job listing of the
#: tenants behind it answered 500). The bound is strict and exact: ``datetime.max``'s timestamp
#: as a float rounds up to this very value, so ``<=`` it let the year 10000 through; the float
#: just below it (…799.99997) still converts, to 9999-12-31T23:59:59.999969Z.
ESTIMATES_END_S = 253_402_300_800.0

#: The earliest estimated start the API states (POSIX s): the epoch. Estimates count from the
#: round's clock, so one before 1970 is a broken record, not an estimate (and one before the year
#: 1 has no ``datetime``: it answered 500 as well).
EARLIEST_ESTIMATE_S = 0.0


def stated_estimate(eta: Any) -> float | None:
    """``eta`` (POSIX s, as stored) when the API can state it as a datetime: a finite number from
    :data:`EARLIEST_ESTIMATE_S` (included) to :data:`ESTIMATES_END_S` (excluded); ``None``
    otherwise (missing, not a number, NaN or infinite, or out of those bounds)."""
    if isinstance(eta, bool) or not isinstance(eta, int | float):
        return None
    # NaN compares false and an infinity is out of bounds; an int compares exactly however large
    if not EARLIEST_ESTIMATE_S <= eta < ESTIMATES_END_S:
        return None
    return float(eta)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A pending job's ``reason`` (the policy's words, not yet redacted for other tenants) and
    ``estimated_start_s`` (POSIX s, ``None``: no estimate)."""

    reason: str
    estimated_start_s: float | None


def estimates_for(
    state: ClusterState, decisions: core.RoundDecisions, policy: core.Policy, profile: core.Profile
) -> dict[str, float]:
    """``{str(job id): estimated start (POSIX s)}`` of the round's waiting jobs, in the policy's
    order (its ``waits``), starts only at the rounds to come (every ``SHAREWISE_ROUND_INTERVAL_S``);
    empty for a preemptive policy (:func:`~scheduling.core.eta.estimate_mode`)."""
    mode = estimate_mode(policy)
    if mode is None or not decisions.waits:
        return {}
    starts = estimated_starts(
        state.snapshot,
        decisions,
        profile,
        (w.job_id for w in decisions.waits),  # read only up to the limit's worth of jobs
        mode,
        round_interval_s=float(settings.SHAREWISE_ROUND_INTERVAL_S),
    )
    return {str(job_id): round(t, 3) for job_id, t in starts.items()}


def carry_estimates(record: Round, latest_pk: int | None, latest_estimates: Any = None) -> bool:
    """A round not stored (a repeat of the latest one, ``latest_pk``, whose stored estimates are
    ``latest_estimates``) leaves its fresh estimates (``record.estimated_starts``) on that latest
    round, so readers see the newest ones; unchanged estimates are not written again. Returns
    whether it wrote."""
    if record.pk is None and latest_pk is not None and latest_estimates != record.estimated_starts:
        Round.objects.filter(pk=latest_pk).update(estimated_starts=record.estimated_starts)
        return True
    return False


_parsed: dict[tuple[Any, ...], dict[int, str]] = {}
_parsed_lock = threading.Lock()


def _reasons_of(key: tuple[Any, ...]) -> dict[int, str]:
    """``{job id: reason}`` of the ``wait`` decisions of the round ``key`` = ``(pk, finished_at)``
    names, parsed once per process (decisions never change once written; only the latest round's
    are kept; ``finished_at`` tells apart two rounds of one primary key, e.g. after a flush)."""
    with _parsed_lock:
        cached = _parsed.get(key)
    if cached is not None:
        return cached
    stored = Round.objects.filter(pk=key[0]).values_list("decisions", "waits").first() or ([], {})
    reasons = dict(wait_decisions(*stored))
    with _parsed_lock:
        _parsed.clear()
        _parsed[key] = reasons
    return reasons


def waiting_details(job_ids: Iterable[int]) -> dict[int, Waiting]:
    """For each of ``job_ids`` (pending jobs): the latest round's reason and estimated start
    (:data:`NOT_YET_CONSIDERED` and no estimate for a job that round did not see, nor for an
    estimate out of :func:`stated_estimate`'s bounds). Two small queries, plus the round's decisions
    once per round and process."""
    ids = list(job_ids)
    if not ids:
        return {}
    latest = (
        Round.objects.order_by("-started_at", "-id")
        .values_list("pk", "finished_at", "estimated_starts")
        .first()
    )
    if latest is None:
        return {j: Waiting(NOT_YET_CONSIDERED, None) for j in ids}
    pk, finished, estimates = latest
    reasons = _reasons_of((pk, finished))
    estimates = estimates or {}
    found: dict[int, Waiting] = {}
    for j in ids:
        reason = reasons.get(j)
        if reason is None:
            found[j] = Waiting(NOT_YET_CONSIDERED, None)
        else:
            found[j] = Waiting(reason, stated_estimate(estimates.get(str(j))))
    return found
