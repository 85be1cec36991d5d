"""What the policy believes, against what is true, in the simulator (issue 10, docs/LEARNING.md §5).

The engine computes every job's real pace from the **truth** profile; with a :class:`Belief` the
policy decides from a **prior** instead — the shipped table, or one with a stated error
(:class:`~scheduling.sim.perturbed.PerturbedProfile`) — and, when learning, from
``LearnedProfile(prior, learner.knowledge())`` with the same core code the service uses
(:mod:`scheduling.core.learning`). Pure Python, deterministic for a seed.

- **Observations.** A running job reports like an agent: once per co-location segment (the set
  of jobs on its GPUs unchanged), when the segment has lasted :data:`REPORT_INTERVAL_S` (after its
  restart cost, if any). Alone on all its GPUs → an exclusive iteration time, measured at its
  sub-batch and brought to the full batch with the prior's speed curve
  (:func:`~scheduling.core.learning.full_batch_time_s`), and its model's memory counts as measured;
  sharing → its ``ξ`` (the gang's pace: the largest over its partners), attributed to the pair with
  the partner that has that largest ``ξ``. With ``measure_noise = S`` every measurement is
  multiplied by ``exp(N(0, S²))`` (seeded).
- **What the policy sees.** A new ``LearnedProfile`` only when the knowledge changed (policies
  memoise per profile object); each job's ``iter_time_s`` by the order of trust
  (:func:`~scheduling.core.learning.choose_iter_time`): its own measurement, else the trace's
  time as declared. Its class's pooled time is left out here: in a trace every job declares its
  true time, so a class could only pull a belief away from the truth (the jobs of one Chronus
  class differ by factors of 1,000, and three of them agreeing by chance would speak for the rest);
  the service, whose declarations are unverified, pools classes.
- **Regret.** A start with shares is *regretted* when, with the true ``ξ`` and true remaining
  times at that instant, ``T_con ≥ T_seq`` for any of its pairs (MODEL.md §2): it would better
  have waited. **Prediction error**: ``|ξ_predicted − ξ_true| / ξ_true`` of both sides of each
  decided pair (the incoming job's ``ξ`` is its gang's), kept with the decision's time.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduling.core.learning import (
    Knowledge,
    LearnedProfile,
    Learner,
    SlowdownPrior,
    choose_iter_time,
    full_batch_time_s,
)
from scheduling.core.sharing import gang_shares, shares
from scheduling.core.types import Job, JobId, Profile, Start
from scheduling.sim.job_state import JobState

#: Trace time (s) a co-location must last before the job reports on it: an agent's progress
#: report interval, long enough for the iteration time to settle after a start **(ours)**.
REPORT_INTERVAL_S = 30.0
#: Relative difference below which a learned iteration time is the declared one (float round-off
#: of the log-space mean must not reorder jobs of equal keys).
SAME_TIME_REL = 1e-9
#: Parts the prediction-error series is cut into (decided pairs in time order).
ERROR_PARTS = 10


@dataclass(frozen=True, slots=True)
class LearningSummary:
    """What one run of a policy decided under its belief (module docstring).

    ``decisions``: starts with shares; ``regretted``: those worse than running one after the other
    under the truth; ``pair_sides``: ``ξ`` predictions made (two per decided pair); ``xi_mape``:
    their mean relative error (``nan`` with none); ``xi_mape_parts``: the same per tenth of them in
    time order, with ``part_end_s`` the time of the last decision in each part (``nan``: empty);
    ``slowdown_reports``/``exclusive_reports``: observations fed to the learner (0 without
    learning); ``profiles_built``: learned profiles handed to the policy.
    """

    decisions: int
    regretted: int
    pair_sides: int
    xi_mape: float
    xi_mape_parts: tuple[float, ...]
    part_end_s: tuple[float, ...]
    slowdown_reports: int
    exclusive_reports: int
    profiles_built: int


class Belief:
    """The policy's view of speeds in one simulation run (module docstring). Mutable; one per run.

    ``truth``: the profile the engine runs jobs by (give the engine the same object); ``prior``:
    what the policy starts from; ``learn``: feed observations to a :class:`Learner`;
    ``measure_noise``: standard deviation of ``ln`` of each measurement's noise (≥ 0); ``seed``:
    of that noise. Raises ``ValueError`` for a negative noise or report interval ≤ 0.
    """

    def __init__(
        self,
        truth: Profile,
        prior: SlowdownPrior,
        *,
        learn: bool = False,
        measure_noise: float = 0.0,
        seed: int = 0,
        report_interval_s: float = REPORT_INTERVAL_S,
    ) -> None:
        if not (measure_noise >= 0 and math.isfinite(measure_noise)):
            raise ValueError(f"measurement noise must be a finite number ≥ 0, got {measure_noise!r}")
        if not (report_interval_s > 0 and math.isfinite(report_interval_s)):
            raise ValueError(
                f"report interval must be a positive number of seconds, got {report_interval_s!r}"
            )
        self.truth = truth
        self.prior = prior
        self.learner: Learner | None = Learner() if learn else None
        self.measure_noise = measure_noise
        self.report_interval_s = report_interval_s
        self._rng = random.Random(seed)
        self.next_due = math.inf  # earliest pending report (s), inf when none
        self._due: list[tuple[float, int, JobState, int, JobState | None]] = []
        self._seq = 0
        self._knowledge: Knowledge | None = None
        self._profile: Profile = prior
        self._views: dict[JobId, tuple[Job, Job]] = {}  # job as given → job as believed
        self._changed: set[JobId] = set()
        self._errors: list[tuple[float, float]] = []
        self.decisions = self.regretted = 0
        self.slowdown_reports = self.exclusive_reports = self.profiles_built = 0

    # -- what the policy sees ---------------------------------------------------------------------

    def profile(self) -> Profile:
        """The profile the policy decides with this round: the prior, or the learned profile over
        it (the same object until the knowledge changes)."""
        if self.learner is None:
            return self.prior
        knowledge = self.learner.knowledge()
        if knowledge is not self._knowledge:
            self._knowledge = knowledge
            self._profile = LearnedProfile(self.prior, knowledge)
            self.profiles_built += 1
        return self._profile

    def believe(self, job: Job) -> Job:
        """``job`` (as the engine holds it: ``iter_time_s`` is the trace's) with the iteration time
        the policy believes (:func:`choose_iter_time`; the same object when that is the trace's)."""
        cached = self._views.get(job.id)
        if cached is not None and cached[0] is job:
            return cached[1]
        view = job
        if self.learner is not None:
            own = self.learner.jobs.get(job.id)
            t = choose_iter_time(own, None, job.iter_time_s, job.iter_time_s).value
            if abs(t - job.iter_time_s) > SAME_TIME_REL * job.iter_time_s:
                view = replace(job, iter_time_s=t)
        self._views[job.id] = (job, view)
        return view

    def changed_jobs(self) -> set[JobId]:
        """Jobs whose believed iteration time may have changed since the last call (then cleared);
        the engine gives the pending ones to :meth:`believe` again."""
        changed, self._changed = self._changed, set()
        return changed

    # -- observations -----------------------------------------------------------------------------

    def segment(self, state: JobState, now: float, partner: JobState | None) -> None:
        """A running job's co-location changed at ``now`` (s): it will report once, after
        :data:`REPORT_INTERVAL_S`, unless it changes again. ``partner``: the job beside which it
        is slowest, ``None`` when it is alone on all its GPUs."""
        if self.learner is None:
            return
        due = max(now, state.resume_at) + self.report_interval_s
        self._seq += 1
        heapq.heappush(self._due, (due, self._seq, state, state.version, partner))
        self.next_due = min(self.next_due, due)

    def observe(self, now: float) -> bool:
        """Feed the learner every report due by ``now`` (s) whose segment still holds; whether
        anything was learned."""
        learner = self.learner
        learned = False
        due = self._due
        while due and due[0][0] <= now:
            _, _, state, version, partner = heapq.heappop(due)
            placement = state.placement
            if state.version != version or placement is None or learner is None:
                continue
            job, sub = state.base, placement.sub_batch
            if partner is None:
                measured = self.truth.iter_time_s(job, sub) * self._noise()
                learner.observe_exclusive(job, full_batch_time_s(self.prior, job, sub, measured))
                learner.observe_memory(job)
                self.exclusive_reports += 1
                self._iteration_time_changed(job)
            else:
                assert partner.placement is not None  # it shares this segment's GPUs
                learner.observe_slowdown(
                    job, sub, partner.base, partner.placement.sub_batch, state.xi * self._noise()
                )
                self.slowdown_reports += 1
            learned = True
        self.next_due = due[0][0] if due else math.inf
        return learned

    def _noise(self) -> float:
        return math.exp(self._rng.gauss(0.0, self.measure_noise)) if self.measure_noise else 1.0

    def _iteration_time_changed(self, job: Job) -> None:
        """The job's own measured time changed: the engine asks :meth:`believe` again."""
        self._changed.add(job.id)
        self._views.pop(job.id, None)

    # -- decisions --------------------------------------------------------------------------------

    def decided(self, now: float, job: Job, start: Start, partners: Sequence[tuple[Job, int]]) -> None:
        """Judge a start with shares against the truth: ``job`` and ``partners`` (each with its
        sub-batch, in the order of ``start.shares``) carry their true iteration times and progress
        at ``now`` (s)."""
        truth = gang_shares(
            self.truth,
            job,
            start.sub_batch,
            [(p, sub, share.gpu_ids) for (p, sub), share in zip(partners, start.shares, strict=True)],
        )
        self.decisions += 1
        if not all(shares(t.t_seq_s, t.t_con_s) for t in truth):
            self.regretted += 1
        errors = self._errors
        for predicted, actual in zip(start.shares, truth, strict=True):
            errors.append((now, abs(predicted.xi_self - actual.xi_self) / actual.xi_self))
            errors.append((now, abs(predicted.xi_partner - actual.xi_partner) / actual.xi_partner))

    def summary(self) -> LearningSummary:
        """The run's :class:`LearningSummary`."""
        errors = self._errors
        n = len(errors)
        parts = [errors[k * n // ERROR_PARTS : (k + 1) * n // ERROR_PARTS] for k in range(ERROR_PARTS)]
        return LearningSummary(
            decisions=self.decisions,
            regretted=self.regretted,
            pair_sides=n,
            xi_mape=statistics.fmean(e for _, e in errors) if errors else math.nan,
            xi_mape_parts=tuple(statistics.fmean(e for _, e in p) if p else math.nan for p in parts),
            part_end_s=tuple(p[-1][0] if p else math.nan for p in parts),
            slowdown_reports=self.slowdown_reports,
            exclusive_reports=self.exclusive_reports,
            profiles_built=self.profiles_built,
        )
