"""The outcome of one simulation run (:class:`SimResult`), kept apart from the engine that makes it."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.core.metrics import JobOutcome
from scheduling.core.types import JobId
from scheduling.core.usage import UsageLedger
from scheduling.sim.belief import LearningSummary


@dataclass(frozen=True, slots=True)
class SimResult:
    """Outcome of one simulation.

    ``outcomes``: finished jobs in completion order; ``unfinished``: ids of jobs never finished
    (the policy left them waiting with nothing else left to happen); ``timeline``: ``(t, busy
    GPUs, shared GPUs)`` change points (s); ``capacity_gpus``: healthy GPUs; ``rounds``: policy
    calls made; ``preemptions``: preemptions applied; ``mean_shared_slowdown``: mean ξ over the
    time jobs ran shared, weighted by that time (``nan`` if nothing was shared); ``learning``: the
    belief's summary (:class:`~scheduling.sim.belief.LearningSummary`) of a run with one;
    ``usage``: GPU-time charged per tenant over time (with ``SimConfig.usage_bin_s``).
    """

    policy: str
    outcomes: tuple[JobOutcome, ...]
    unfinished: tuple[JobId, ...]
    timeline: tuple[tuple[float, int, int], ...]
    capacity_gpus: int
    rounds: int
    preemptions: int
    mean_shared_slowdown: float
    seed: int = 0
    learning: LearningSummary | None = None
    usage: UsageLedger | None = None
