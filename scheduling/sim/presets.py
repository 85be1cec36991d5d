"""Named settings that reproduce each peer's evaluation in one flag (``--preset NAME``).

Each :class:`Preset` sets the simulator's round semantics, restart cost and fidelity knobs
(:mod:`scheduling.sim.fidelity`), the exclusive baselines' placement and Tiresias' knobs
(:class:`~scheduling.core.types.TiresiasConfig`). docs/FIDELITY.md gives every field with the
file of the peer's repository it comes from; :attr:`Preset.sources` repeats them in short.
An option given on the command line overrides the preset's value.

- ``muri-sim``: Muri's trace-driven simulator (Rivendile/Muri ``simulator/``, a fork of
  Tiresias' simulator), as run for the paper's Figures 9–10 (``sim_fig9.sh``, ``sim_fig10.sh``).
- ``muri-testbed``: Muri's physical testbed (8 × 8 V100; ``cluster_exp/``, ``run.sh``).
- ``sjfbsbf-testbed``: the SJF-BSBF authors' testbed baselines (Lai-JX/Scheduler,
  ``scheduler_impl/schedulers.py``; 150 s rounds, the paper's interval).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from scheduling.core.types import TiresiasConfig
from scheduling.sim.engine import SimConfig
from scheduling.sim.fidelity import MURI_SIM, MURI_TESTBED, Fidelity


@dataclass(frozen=True, slots=True)
class Preset:
    """One peer's setting (module docstring). Times in s."""

    name: str
    description: str
    round_interval_s: float
    round_on_events: bool
    restart_cost_s: float
    placement: str
    tiresias: TiresiasConfig
    fidelity: Fidelity
    sources: tuple[str, ...] = field(default=())

    def sim_config(self, base: SimConfig | None = None) -> SimConfig:
        """``base`` (default: ours) with this preset's rounds, restart cost, placement, Tiresias
        knobs and fidelity knobs."""
        base = base or SimConfig()
        return replace(
            base,
            round_interval_s=self.round_interval_s,
            round_on_events=self.round_on_events,
            restart_cost_s=self.restart_cost_s,
            scheduler=replace(base.scheduler, placement=self.placement, tiresias=self.tiresias),
            fidelity=self.fidelity,
        )


MURI_TIRESIAS = TiresiasConfig(
    thresholds=(3_250.0, 7_200.0), service="gpu_s", starvation_guard=False, demoted="back"
)
"""Muri's Tiresias (``dlas-gpu``): three queues at 3,250 and 7,200 GPU-s (``jobs.py``:
``num_queue = 3``, ``queue_limit = [3250, 7200, 18000]``), guard off (``dlas_sim_jobs(True)``,
``solve_starvation=0``), queue lists (a demoted job to the back of the lower queue)."""

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="muri-sim",
            description="Muri's simulator (Figures 9-10): a round, relaunching every job, at each event",
            round_interval_s=math.inf,
            round_on_events=True,
            restart_cost_s=0.0,
            placement="spread",
            tiresias=MURI_TIRESIAS,
            fidelity=Fidelity(
                iteration_time_factor=1.015,
                first_start=MURI_SIM,
                relaunch=MURI_SIM,
                replan="every-round",
                rounds_at_horizon=True,
                percentile="index",
                charge="interrupted",
            ),
            sources=(
                "rounds: simulator/run_sim.py, one pass per arrival, completion and queue jump",
                "overheads: simulator/run_sim.py overhead_dict, charged to every running job per event "
                "(max(dt - oh, 0); the end is computed without it)",
                "iteration time x1.015: simulator/jobs.py itertime_overhead_list[0]",
                "placement: GPU counting (dlas_sim_jobs counts free GPUs; shortest_first_sim_jobs "
                "re-packs every job by yarn at each event, migrating freely)",
                "tiresias: simulator/jobs.py queue_limit, run_sim.py dlas_sim_jobs(True)",
                "p99: simulator/calc.py jct_list[int(cnt*0.99)]",
            ),
        ),
        Preset(
            name="muri-testbed",
            description="Muri's 8x8 testbed: 360 s re-plans relaunching every placed job",
            round_interval_s=360.0,
            round_on_events=False,
            restart_cost_s=0.0,
            placement="consolidated",
            tiresias=MURI_TIRESIAS,
            fidelity=Fidelity(
                iteration_time_factor=1.015,
                first_start=MURI_TESTBED,
                relaunch=MURI_TESTBED,
                replan="on-change",
                percentile="index",
            ),
            sources=(
                "rounds: cluster_exp/run.sh schedule_intervals=360; run.py re-plans on done/new/demote",
                "overheads: from cluster_exp/results/*/job.csv (benchmarks/derive_launch_overhead.py)",
                "iteration time x1.015: simulator/jobs.py (the testbed's measured ratio)",
                "placement: run.sh placement=yarn; run.py try_get_job_res in rank order",
                "tiresias: cluster_exp/jobs.py queue_limit, run.py dlas_sim_jobs(scheduler, True)",
                "p99: cluster_exp/calc.py",
            ),
        ),
        Preset(
            name="sjfbsbf-testbed",
            description="the SJF-BSBF authors' baselines: 150 s rounds, their two-queue Tiresias",
            round_interval_s=150.0,
            round_on_events=False,
            restart_cost_s=30.0,
            placement="consolidated",
            tiresias=TiresiasConfig(
                thresholds=(700.0,),
                service="wall_s",
                starvation_guard=True,
                starvation_factor=1.0,
                demoted="back",
            ),
            fidelity=Fidelity(percentile="index"),
            sources=(
                "rounds: the paper's 150 s interval (run.sh schedule_intervals, 60 there)",
                "placement: run.sh select_placement, yarn for fifo, sjf and Tiresias",
                "tiresias: jobs.py num_queue=2, queue_limit=[700]; schedulers.py Tiresias_jobs "
                "(solve_starvation=1, gputime=False)",
                "p99: calc.py jct_list[int(cnt*0.99)]",
            ),
        ),
    )
}
"""The presets by name."""

PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)
