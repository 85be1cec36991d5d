"""The simulator's knobs (:class:`SimConfig`), and its defaults; ``scheduling.sim.engine``
re-exports them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduling.core.types import SchedulerConfig, TenantQuota
from scheduling.sim.fidelity import Fidelity

#: Default cost (s) of restarting a preempted job: no progress while its checkpoint is restored.
DEFAULT_RESTART_COST_S = 30.0
DEFAULT_ROUND_INTERVAL_S = 60.0


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Simulator knobs.

    ``round_interval_s`` (s, > 0); ``round_on_events``: also a round at each arrival and
    completion; ``restart_cost_s`` (s, ≥ 0): no-progress time after a preempted job restarts;
    ``seed``: recorded in the result (the engine itself is deterministic); ``skip_idle_rounds``:
    skip rounds that provably change nothing (off only to check that it changes nothing);
    ``scheduler``/``tenant_quotas``: passed to the policy in every snapshot; ``fidelity``:
    :class:`~scheduling.sim.fidelity.Fidelity`; ``usage_bin_s`` (s): record each tenant's charged
    GPU-time in bins this wide for windowed GPU-hours (:class:`~scheduling.core.usage.UsageLedger`,
    ``SimResult.usage``; ``None``: not recorded). Raises ``ValueError`` for a non-positive
    interval (``inf`` needs ``round_on_events``) or a negative restart cost.
    """

    round_interval_s: float = DEFAULT_ROUND_INTERVAL_S
    round_on_events: bool = False
    restart_cost_s: float = DEFAULT_RESTART_COST_S
    seed: int = 0
    skip_idle_rounds: bool = True
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    tenant_quotas: Mapping[str, int | TenantQuota] = field(default_factory=dict)
    fidelity: Fidelity = field(default_factory=Fidelity)
    usage_bin_s: float | None = None

    def __post_init__(self) -> None:
        interval = self.round_interval_s
        if not interval > 0:
            raise ValueError(f"round interval must be a positive number of s, got {interval}")
        if math.isinf(interval) and not self.round_on_events:
            raise ValueError(
                "a round interval of inf needs round_on_events: with no periodic round, "
                "the only rounds are those at arrivals and completions"
            )
        if not (math.isfinite(self.restart_cost_s) and self.restart_cost_s >= 0):
            raise ValueError(f"restart cost must be ≥ 0 s, got {self.restart_cost_s}")
