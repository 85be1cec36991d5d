"""What the simulator models of a real cluster beyond the schedule itself (docs/FIDELITY.md).

One :class:`Fidelity` value, :attr:`scheduling.sim.engine.SimConfig.fidelity`, holds the knobs
that make our simulator reproduce its peers (Muri's and Tiresias' simulators, Muri's testbed);
every default leaves the simulator as it was:

- ``iteration_time_factor``: every job's iteration time × this (real iterations were 1.015 ×
  the trace's on Muri's testbed; Muri's simulator multiplies by 1.015, ``jobs.py``);
- ``first_start``: no progress for this long after a job's first start (its launch);
- ``relaunch``: no progress for this long after each relaunch: a restart after a preemption (on
  top of ``SimConfig.restart_cost_s``) and, at a re-plan, every running job;
- ``replan``: which rounds relaunch every running job: ``"never"`` (ours: a running job keeps
  running), ``"every-round"`` (Muri's simulator: every event re-places every job, each paying
  its start overhead) or ``"on-change"`` (Muri's testbed: a round after an arrival, a
  completion or a queue change since the round before kills and relaunches every job it places);
- ``charge``: how a relaunch overhead is paid: ``"launch"`` (no progress for it after each
  launch: the testbed's physics) or ``"interrupted"`` (Muri's simulator: at each re-plan every
  running job loses ``min(overhead, time since its last re-plan or start)`` of progress, and the
  interval that ends with its completion costs nothing — it computes the end without it);
- ``rounds_at_horizon``: also a round at each instant the policy's ranking may change with time
  alone (its skip horizon: Tiresias' demotions and promotions — the "job jump" events of the
  peers' simulators);
- ``percentile``: how the report's percentiles are read off the sorted JCTs (``"linear"``, ours,
  or ``"index"``, the peers': ``sorted[int(n · q / 100)]``, ``calc.py``).

Overheads are per model and gang size (:class:`OverheadTable`); the named tables are in
:data:`OVERHEAD_TABLES`. Times in s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduling.core.metrics import PERCENTILE_METHODS
from scheduling.core.types import Job
from scheduling.sim.job_state import JobState

REPLAN_MODES: tuple[str, ...] = ("never", "every-round", "on-change")
"""Values of :attr:`Fidelity.replan`."""

CHARGE_MODES: tuple[str, ...] = ("launch", "interrupted")
"""Values of :attr:`Fidelity.charge`."""


@dataclass(frozen=True, slots=True)
class OverheadTable:
    """Seconds without progress after a launch, by model and gang size.

    ``by_model``: model → s for every gang size; ``by_gang``: gang size → {model → s} (the
    largest listed gang size not above the job's is used; a model missing there falls back to
    ``by_model``); ``default_s``: any other model. ``name``: how the report and the command line
    call it. Raises ``ValueError`` for a negative or non-finite time.
    """

    name: str
    by_model: Mapping[str, float] = field(default_factory=dict)
    by_gang: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    default_s: float = 0.0
    # (model, gang size) -> s, filled by :meth:`seconds`: a re-plan asks for every running job
    memo: dict[tuple[str, int], float] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        values = [self.default_s, *self.by_model.values()]
        values += [s for table in self.by_gang.values() for s in table.values()]
        if any(not (math.isfinite(v) and v >= 0) for v in values):
            raise ValueError(f"overheads must be finite and ≥ 0 s, got {values}")

    def seconds(self, job: Job) -> float:
        """The overhead (s) of ``job``'s launch."""
        key = (job.model, job.gpus)
        known = self.memo.get(key)
        if known is not None:
            return known
        seconds = float(self.by_model.get(job.model, self.default_s))
        sizes = [g for g in self.by_gang if g <= job.gpus]
        if sizes:
            table = self.by_gang[max(sizes)]
            if job.model in table:
                seconds = float(table[job.model])
        self.memo[key] = seconds
        return seconds

    @classmethod
    def constant(cls, seconds: float) -> OverheadTable:
        """The same overhead for every job."""
        return cls(f"{seconds:g}", default_s=float(seconds))


NO_OVERHEAD = OverheadTable("0")
"""No launch overhead (ours)."""

MURI_SIM = OverheadTable(
    "muri-sim",
    by_gang={
        1: {
            "vgg16": 7,
            "vgg19": 7,
            "resnet18": 4,
            "shufflenet_v2_x1_0": 4,
            "bert": 10,
            "gpt2": 10,
            "a2c": 38,
            "dqn": 5,
        },
        2: {
            "vgg16": 7,
            "vgg19": 7,
            "resnet18": 5,
            "shufflenet_v2_x1_0": 4,
            "bert": 10,
            "gpt2": 10,
            "a2c": 39,
            "dqn": 5,
        },
        4: {
            "vgg16": 8,
            "vgg19": 8,
            "resnet18": 5,
            "shufflenet_v2_x1_0": 5,
            "bert": 10,
            "gpt2": 10,
            "a2c": 39,
            "dqn": 6,
        },
        8: {
            "vgg16": 9,
            "vgg19": 9,
            "resnet18": 7,
            "shufflenet_v2_x1_0": 5,
            "bert": 10,
            "gpt2": 10,
            "a2c": 46,
            "dqn": 6,
        },
        16: {
            "vgg16": 9,
            "vgg19": 10,
            "resnet18": 7,
            "shufflenet_v2_x1_0": 7,
            "bert": 10,
            "gpt2": 10,
            "a2c": 46,
            "dqn": 8,
        },
        32: {
            "vgg16": 10,
            "vgg19": 10,
            "resnet18": 7,
            "shufflenet_v2_x1_0": 8,
            "bert": 10,
            "gpt2": 10,
            "a2c": 46,
            "dqn": 8,
        },
    },
    default_s=10.0,
)
"""The start overheads Muri's simulator charges (``simulator/run_sim.py``, ``overhead_dict``:
"profiled overhead of start for each workloads", s by gang size and model; 10 s for another
model)."""

MURI_TESTBED = OverheadTable(
    "muri-testbed",
    by_model={
        "a2c": 59.6,
        "bert": 21.0,
        "dqn": 19.7,
        "gpt2": 24.1,
        "resnet18": 22.6,
        "shufflenet_v2_x1_0": 25.4,
        "vgg16": 17.1,
        "vgg19": 18.4,
    },
    default_s=22.3,
)
"""Relaunch overheads measured on Muri's testbed (8 × 8 V100), derived by
``benchmarks/derive_launch_overhead.py`` from its published results
(``cluster_exp/results/{SRTF,SRSF,tiresias,themis}/job.csv`` with the trace
``cluster_exp/trace-data/cluster_trace.csv``): over the jobs launched exactly once
(``job_counter == 1``: no re-plan while they ran), the median per model of ``(end − start) −
iterations × iteration_time × 1.015``; another model gets the median over all of them."""

OVERHEAD_TABLES: dict[str, OverheadTable] = {t.name: t for t in (NO_OVERHEAD, MURI_SIM, MURI_TESTBED)}
"""Named overhead tables (``--first-start-overhead`` / ``--relaunch-overhead`` take a name or
a number of seconds)."""


def overhead_table(text: str) -> OverheadTable:
    """A named table of :data:`OVERHEAD_TABLES`, or a constant number of seconds (≥ 0).
    Raises ``ValueError`` (listing the names) for anything else."""
    if text in OVERHEAD_TABLES:
        return OVERHEAD_TABLES[text]
    try:
        seconds = float(text)
    except ValueError:
        raise ValueError(
            f"unknown overhead table {text!r}: give seconds or one of {', '.join(OVERHEAD_TABLES)}"
        ) from None
    return OverheadTable.constant(seconds)


@dataclass(frozen=True, slots=True)
class Fidelity:
    """The simulator's fidelity knobs (module docstring); the defaults change nothing.

    Raises ``ValueError`` for a non-positive or non-finite factor, an unknown re-plan mode or
    percentile method.
    """

    iteration_time_factor: float = 1.0
    first_start: OverheadTable = NO_OVERHEAD
    relaunch: OverheadTable = NO_OVERHEAD
    replan: str = "never"
    rounds_at_horizon: bool = False
    percentile: str = "linear"
    charge: str = "launch"

    def __post_init__(self) -> None:
        factor = self.iteration_time_factor
        if not (isinstance(factor, int | float) and math.isfinite(factor) and factor > 0):
            raise ValueError(f"iteration-time factor must be a positive number, got {factor!r}")
        if self.charge not in CHARGE_MODES:
            raise ValueError(f"charge must be one of {', '.join(CHARGE_MODES)}, got {self.charge!r}")
        if self.replan not in REPLAN_MODES:
            raise ValueError(f"replan must be one of {', '.join(REPLAN_MODES)}, got {self.replan!r}")
        if self.percentile not in PERCENTILE_METHODS:
            raise ValueError(
                f"percentile must be one of {', '.join(PERCENTILE_METHODS)}, got {self.percentile!r}"
            )

    def scaled(self, jobs: Sequence[Job]) -> Sequence[Job]:
        """``jobs`` with their iteration times × :attr:`iteration_time_factor` (as they are at 1)."""
        factor = self.iteration_time_factor
        return jobs if factor == 1.0 else [replace(j, iter_time_s=j.iter_time_s * factor) for j in jobs]

    def start_delay(self, job: Job, preemptions: int, restart_cost_s: float) -> float:
        """Seconds without progress after ``job`` starts: its first-start overhead, or after a
        preemption the restart cost plus its relaunch overhead (with ``charge="interrupted"``
        the overheads are charged when a re-plan interrupts the run instead: the restart cost
        only)."""
        if self.charge == "interrupted":
            return restart_cost_s if preemptions else 0.0
        return restart_cost_s + self.relaunch.seconds(job) if preemptions else self.first_start.seconds(job)

    def started(self, s: JobState, now: float, restart_cost_s: float) -> None:
        """Job ``s`` starts at ``now`` (s): no progress until ``now +`` :meth:`start_delay`, and
        the start is its last launch for the ``"interrupted"`` charge."""
        s.resume_at = now + self.start_delay(s.base, s.preemptions, restart_cost_s)
        s.mark, s.mark_done = now, s.done

    def replans(self, before: bool, changed: bool) -> bool:
        """Whether a due round relaunches the running jobs, asked ``before`` its decisions (the
        ``"interrupted"`` charge) or after them (``"launch"``); ``changed``: an arrival,
        completion or queue change since the last due round."""
        if (self.charge == "interrupted") != before:
            return False
        return self.replan == "every-round" or (self.replan == "on-change" and changed)

    def relaunch_job(self, s: JobState, now: float) -> None:
        """Charge running ``s`` (progress brought up to ``now``) its relaunch overhead (module
        docstring, ``charge``); the caller reschedules its completion."""
        overhead = self.relaunch.seconds(s.base)
        if self.charge == "interrupted":
            s.done = max(s.mark_done, s.done - min(overhead, now - s.mark) * s.rate)
            s.mark, s.mark_done = now, s.done
        else:
            s.resume_at = max(s.resume_at, now + overhead)

    def is_default(self) -> bool:
        """Whether every knob is at its default (the report then leaves them out)."""
        return self == Fidelity()

    def summary(self) -> dict[str, object]:
        """The knobs for the report: ``{"iteration_time_factor", "first_start_overhead",
        "relaunch_overhead", "replan", "rounds_at_horizon", "percentile", "charge"}`` (tables by
        name)."""
        return {
            "iteration_time_factor": self.iteration_time_factor,
            "first_start_overhead": self.first_start.name,
            "relaunch_overhead": self.relaunch.name,
            "replan": self.replan,
            "rounds_at_horizon": self.rounds_at_horizon,
            "percentile": self.percentile,
            "charge": self.charge,
        }
