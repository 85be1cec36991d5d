"""When a round of a policy provably decides nothing, so a simulator may skip it (pure Python).

Each policy declares its own rule as a ``skip_rule`` class attribute (a :class:`SkipRule`); the
trace-driven simulator (:mod:`scheduling.sim.engine`) reads it. A policy without one is only
skipped on an empty queue (:data:`NO_SKIP`). A rule never changes a result, only how many rounds
are run to get it (the simulator's tests compare runs with skipping on and off).

Times in s.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from scheduling.core.types import Snapshot

Horizon = Callable[[Snapshot], float]
"""``horizon(snapshot)``: the earliest instant (s) at which the passing of time alone may change a
policy's decision, given the snapshot of a round that decided nothing."""


def never(snapshot: Snapshot) -> float:
    """Horizon of a policy whose "do nothing" stays "do nothing" while only time passes."""
    return math.inf


@dataclass(frozen=True, slots=True)
class SkipRule:
    """When a round of a policy may be skipped without changing the result.

    ``capacity``: the policy never preempts, so a round with fewer usable GPUs than the smallest
    pending gang starts nothing. ``shares``: GPUs holding one job count as usable (co-location).
    ``horizon``: after a round that decided nothing, and with no arrival or completion since,
    rounds before ``horizon(...)`` decide nothing too (``None``: always run such rounds).
    """

    capacity: bool
    shares: bool
    horizon: Horizon | None


NO_SKIP = SkipRule(capacity=False, shares=False, horizon=None)
"""The rule of a policy that declares none: only a round with an empty queue is skipped."""


def bound_crossing_horizon(snapshot: Snapshot) -> float:
    """With tenant quotas, the next instant (s) at which a pending job reaches the starvation bound
    (``waiting_since + starvation_bound_s``), 1 µs early; ``inf`` without quotas or such a job.

    From that instant the quota gate waives the borrow bound for the job
    (:meth:`scheduling.core.quota.QuotaGate.refusal`), so time alone may let it start under any
    policy with quotas: every policy's skipped stretch ends there. 1 µs early, so float rounding
    can only make a round run, never skip one that matters.
    """
    if not snapshot.tenant_quotas:
        return math.inf
    bound, now = snapshot.config.starvation_bound_s, snapshot.now
    return (
        min(
            (j.waiting_since + bound for j in snapshot.pending if j.waiting_since + bound > now),
            default=math.inf,
        )
        - 1e-6
    )
