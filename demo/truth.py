"""How fast the demo's emulated jobs really run, and the simulator run they are compared with.

The live service learns (docs/LEARNING.md, "In the service"): the iteration times and slowdowns
in its placement messages are its belief, which moves as it learns. An emulated job that ran at
its message's speed would make the belief the truth. The demo's emulated agents therefore run
each job at a fixed truth (:class:`EmulatedSpeeds`, an ``agent.executors.EmulatedTruth``):

- its iteration time is the trace's ``t_j(B_j)`` brought to the sub-batch with the shipped
  table's samples/s curve (MODEL.md §1) — what the simulator runs it at;
- its slowdown beside its partners (the message's ``partners``) is the largest ``ξ`` of the
  *truth profile*: the shipped table, or with ``--truth-error E`` a table whose slowdowns are the
  shipped ones times a seeded factor in ``[1 − E, 1 + E]`` per ordered pair of job types (the
  simulator's ``--truth-error E --seed N``, ``scheduling.sim.perturbed``), so the service starts
  from a profile that is wrong and must learn.

The comparison (:func:`simulated`) runs the simulator under the same truth, learning from its
jobs' reports as the service does (``scheduling.sim.learning_options``).

Units: seconds (s).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping

from agent.messages import PlacementMessage
from demo.options import DemoConfig, DemoError
from scheduling.core import types as core
from scheduling.core.profiles import TableProfile
from scheduling.sim.engine import SimConfig, SimResult, simulate

#: The simulator's belief-vs-truth options module (the truth and the learning simulator run).
SIM_LEARNING = "scheduling.sim.learning_options"


def simulator_learns() -> bool:
    """Whether this simulator models belief vs truth (:data:`SIM_LEARNING` is installed)."""
    return importlib.util.find_spec(SIM_LEARNING) is not None


def truth_profile(shipped: TableProfile, config: DemoConfig) -> core.Profile:
    """The profile the emulated jobs truly run by: ``shipped``, or with ``--truth-error`` its
    perturbed copy (the simulator's, same seed). Raises :class:`DemoError` for an error outside
    ``[0, 1)``, or when this simulator cannot perturb a table."""
    error = config.truth_error
    if not error:
        return shipped
    if not 0.0 <= error < 1.0:
        raise DemoError(f"--truth-error must be in [0, 1) (a relative error), got {error}")
    if not simulator_learns():
        raise DemoError("--truth-error needs the simulator's belief vs truth (scheduling/sim/perturbed.py)")
    from scheduling.sim.learning_options import LearningSetup

    return LearningSetup(None, error, True, 0.0).truth(shipped, config.seed)


def simulated(
    jobs: tuple[core.Job, ...],
    cluster: core.Cluster,
    policy: core.Policy,
    shipped: TableProfile,
    truth: core.Profile,
    sim_config: SimConfig,
    config: DemoConfig,
) -> tuple[SimResult, bool]:
    """The simulator's run of the same jobs under ``truth``, learning as the live service does
    (from the shipped table, ``--seed``); and whether it learned (a simulator without belief vs
    truth runs the shipped table, as the service did before it learned)."""
    if not simulator_learns():
        return simulate(jobs, cluster, policy, shipped, sim_config), False
    from scheduling.sim.learning_options import LearningSetup

    setup = LearningSetup(None, config.truth_error or None, True, 0.0)
    belief = setup.belief(shipped, truth, config.seed)
    return simulate(jobs, cluster, policy, truth, sim_config, belief=belief), True


class EmulatedSpeeds:
    """The true speeds of the demo's jobs (module docstring), an ``EmulatedTruth``.

    ``trace_jobs``: the workload by trace job id; ``job_ids``: database pk → trace job id (filled
    by the replay as the API answers); ``resolve``: the trace id of a pk not in ``job_ids`` yet
    (a placement can arrive before the replay thread has stored the answer), or ``None``.
    A job it cannot place runs at its message's speed.
    """

    def __init__(
        self,
        shipped: TableProfile,
        truth: core.Profile,
        trace_jobs: Mapping[int, core.Job],
        job_ids: Mapping[int, int],
        resolve: Callable[[int], int | None],
    ) -> None:
        self.shipped = shipped
        self.truth = truth
        self.trace_jobs = trace_jobs
        self.job_ids = job_ids
        self.resolve = resolve

    def job(self, message: PlacementMessage) -> core.Job | None:
        """The trace job of the message's database job, if known."""
        trace_id = self.job_ids.get(message.job_id)
        if trace_id is None:
            trace_id = self.resolve(message.job_id)
        return None if trace_id is None else self.trace_jobs.get(trace_id)

    def iter_time_s(self, message: PlacementMessage) -> float:
        """``t_j(b)`` (s): the trace's time at the full batch, at the message's sub-batch."""
        job = self.job(message)
        if job is None:
            return message.iter_time_s
        return self.shipped.iter_time_s(job, message.sub_batch)

    def slowdown(self, message: PlacementMessage) -> float:
        """The largest true ``ξ`` of the job beside each of its partners (1 alone)."""
        job = self.job(message)
        if job is None:
            return message.slowdown
        xi = 1.0
        for model, sub in message.partners:
            partner = core.Job(0, "", model, sub, 1, 1, 0.0, 1.0)
            xi = max(xi, self.truth.slowdown(job, message.sub_batch, partner, sub)[0])
        return xi


def truth_line(config: DemoConfig, learned: bool) -> str:
    """One line saying what the emulated jobs truly run at and how the simulator compares."""
    if config.truth_error:
        truth = (
            f"emulated jobs' true slowdowns: the shipped profile's off by up to ±{config.truth_error:.0%} "
            f"(seed {config.seed}); the service starts from the shipped profile and learns"
        )
    else:
        truth = "emulated jobs run at the trace's iteration times and the shipped profile's slowdowns"
    simulator = (
        "the simulator runs under the same truth and learns the same way"
        if learned
        else "the simulator (no belief vs truth) runs the shipped profile without learning"
    )
    return f"{truth}; {simulator}"
