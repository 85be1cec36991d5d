"""The learned profile: iteration times and co-location slowdowns learned from what runs (pure).

Both drivers feed it measurements — the service from the agents' progress reports, the simulator
from its simulated jobs — and both decide with the same :class:`LearnedProfile`, layered over the
shipped table (docs/LEARNING.md). Pure Python: no Django, no I/O, no clock.

**What is learned, and under which key.**

- *Exclusive iteration time of a job* ``t_j(B_j)`` (s), from the iteration times it reported while
  it ran alone on its GPUs (a measurement at sub-batch ``b`` is brought to the full batch with the
  base profile's samples/s curve, :func:`full_batch_time_s`).
- *Exclusive iteration time of a job class* ``(model, global batch, GPUs)`` (:data:`IterKey`): the
  first such measurement of every job of the class, pooled, for jobs that have not run yet — one
  sample per job, so that :data:`MIN_CLASS_SAMPLES` counts jobs and the spread is the spread
  between jobs (one long job reporting again and again must not speak for its whole class).
- *Slowdown* ``ξ`` of a job class beside another, keyed by ``(model, sub-batch)`` of each side,
  ordered (:data:`PairKey`: ``ξ`` of the first beside the second): a measured shared iteration time
  divided by the exclusive iteration time at the same sub-batch. The key is the one the shipped
  table answers by (its ``ξ`` is a per-GPU figure of two job types at their micro-batch sizes,
  whatever the gang size, MODEL.md §2): interference comes from the two jobs' kernels and memory
  traffic on one GPU, which depend on the model and the micro-batch; adding the gang size would
  split the samples of one effect five ways (1, 2, 4, 8, 16 GPUs) for an effect (communication)
  the model does not represent.
- *Incompatible pairs* ``{(model, sub-batch), (model, sub-batch)}`` (unordered): a co-located job
  died out of memory beside that partner at those sub-batches; the pair is never placed again.

**The estimator** (docs/LEARNING.md §2). Measurements are summarised per key in log space by an
exponentially forgetting mean and variance (:class:`SampleStats`): the plain mean and variance of
the first :data:`MAX_WEIGHT` samples, then each new sample weighs ``1 / MAX_WEIGHT`` (so a drifting
speed is followed within about 20 reports). A slowdown is the posterior mean of a normal model in
``ln ξ`` (conjugate normal update, known variances): the prior is the shipped profile's ``ξ`` with a
standard deviation by where it came from (:data:`PRIOR_SIGMA`: measured pair, predictor, guessed
default) and each sample has the standard deviation ``max(OBS_SIGMA_MIN, observed spread)``::

    ln ξ̂ = (ln ξ_prior / σ_p² + w · m / σ_o²) / (1 / σ_p² + w / σ_o²)

with ``w`` the effective sample count and ``m`` the mean of ``ln ξ`` samples. One clean
measurement outweighs a measured-table prior by ``σ_p² / σ_o² = 9``.

**Order of trust.** Iteration time (:func:`choose_iter_time`): measured for this job > learned
for its class (at least :data:`MIN_CLASS_SAMPLES` samples) > declared by the user > the profile's
estimate. A declared time is the user's unverified claim, and shortest-job-first rewards
under-declaring: measurements of the same class win over it — when the class is homogeneous (its
samples agree within :data:`MAX_CLASS_SPREAD`); the jobs of a class whose measurements differ by
factors (one model name over many datasets and lengths) say little about one more job, whose own
declaration then stands. Slowdown: the posterior above, whose
prior is, in order, the shipped table's measured pair, its predictor for unseen pairs, or its
conservative default. A pair whose ``ξ`` has no measurement, no table entry and no prediction is
*unknown*: it does not share (:meth:`LearnedProfile.pair_allowed`) unless the round's
``SchedulerConfig.share_unknown`` says so.

Units: seconds (s), MB, dimensionless ``ξ`` (shared ÷ exclusive iteration time).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from scheduling.core.types import Job, JobId, Profile

IterKey = tuple[str, int, int]
"""``(model, global batch, GPUs)``: the class whose exclusive iteration time is pooled."""
SideKey = tuple[str, int]
"""``(model, sub-batch)``: one side of a co-located pair."""
PairKey = tuple[SideKey, SideKey]
"""``((model_a, sub_a), (model_b, sub_b))``: the ``ξ`` of ``a`` while it shares with ``b``."""

#: Effective number of samples at most: later samples weigh ``1 / MAX_WEIGHT`` each (a drifting
#: speed is followed within about this many reports) **(ours)**.
MAX_WEIGHT = 20.0
#: Smallest standard deviation of one ``ln`` sample: a measured iteration time jitters by about
#: 5 % from report to report (data loading, clocks) **(ours)**.
OBS_SIGMA_MIN = 0.05
#: Standard deviation of ``ln ξ`` of the prior by its source **(ours)**: a measured Gavel pair
#: (V100 numbers reused on other GPUs and models mapped onto families: 15 %); the fitted predictor
#: (its leave-pairs-out error, scheduling/profiles/README.md: 35 %); the guessed default (a factor
#: of e either way).
PRIOR_SIGMA: Mapping[str, float] = {"measured": 0.15, "predicted": 0.35, "default": 1.0}
#: Samples of a class before its pooled iteration time is trusted over a declared one **(ours)**.
MIN_CLASS_SAMPLES = 3
#: Largest spread (standard deviation of ``ln`` samples) of a class whose pooled iteration time is
#: trusted over a declared one: its jobs agree within about 25 % **(ours)**. Five times the report
#: jitter (:data:`OBS_SIGMA_MIN`): a class of one kind of job passes even with noisy reports; a
#: class mixing jobs that differ by factors does not.
MAX_CLASS_SPREAD = 0.25

#: A slowdown summary is published to the rounds (a new :class:`Knowledge`) only when it moved
#: materially since last published: its mean or spread of ``ln ξ`` by more than this, or its
#: weight by more than :data:`PUBLISH_WEIGHT_RATIO` **(ours)**. A tenth of one report's jitter
#: (:data:`OBS_SIGMA_MIN`): no decision should hang on less, and every new knowledge costs the
#: policies their memo.
PUBLISH_TOL = 0.005
#: See :data:`PUBLISH_TOL`: of equal samples, weights 1, 2, 3, 4, 6, 8, 11, 14 and 18 are published.
PUBLISH_WEIGHT_RATIO = 1.25

ITER_TIME_SOURCES = ("measured", "learned", "declared", "profile")
"""Where the iteration time a round uses came from (:func:`choose_iter_time`), best first."""


def normalise_model(name: str) -> str:
    """The model part of every key: lower case, letters and digits only (``"ResNet-18"`` →
    ``"resnet18"``), so the spellings of one model share their samples."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def side_key(job: Job, sub_batch: int) -> SideKey:
    """``(model, sub-batch)`` of ``job`` running micro-batches of ``sub_batch``."""
    return (normalise_model(job.model), sub_batch)


def iter_key(job: Job) -> IterKey:
    """``(model, global batch, GPUs)`` of ``job``."""
    return (normalise_model(job.model), job.batch_size, job.gpus)


def pair_id(a: SideKey, b: SideKey) -> PairKey:
    """The unordered pair ``{a, b}`` as a canonical ordered tuple (incompatibility has no order)."""
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True, slots=True)
class SampleStats:
    """Running summary of positive samples in log space, forgetting beyond :data:`MAX_WEIGHT`.

    ``count``: samples seen; ``weight``: their effective number (≤ ``MAX_WEIGHT``);
    ``mean_log``/``var_log``: exponentially weighted mean and variance of ``ln(sample)``
    (West's incremental update, 1979). Immutable: :meth:`add` returns the new summary.
    """

    count: int = 0
    weight: float = 0.0
    mean_log: float = 0.0
    var_log: float = 0.0

    def add(self, value: float) -> SampleStats:
        """The summary with one more sample ``value`` (> 0). Raises ``ValueError`` otherwise."""
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"a sample must be a positive finite number, got {value!r}")
        x = math.log(value)
        weight = min(self.weight + 1.0, MAX_WEIGHT)
        alpha = 1.0 / weight
        delta = x - self.mean_log
        mean = self.mean_log + alpha * delta
        var = (1.0 - alpha) * (self.var_log + alpha * delta * delta)
        return SampleStats(self.count + 1, weight, mean, var)

    @property
    def mean(self) -> float:
        """The geometric mean of the samples (``exp(mean_log)``); ``nan`` with no sample."""
        return math.exp(self.mean_log) if self.count else math.nan

    @property
    def spread(self) -> float:
        """Standard deviation of ``ln(sample)``: about the relative spread of the samples."""
        return math.sqrt(max(0.0, self.var_log))


def posterior_log(prior_value: float, prior_sigma: float, stats: SampleStats | None) -> float:
    """``ln`` of the posterior mean estimate (conjugate normal update in log space, module
    docstring): ``(ln prior/σ_p² + w·m/σ_o²) / (1/σ_p² + w/σ_o²)``, ``σ_o = max(OBS_SIGMA_MIN,
    spread)``, computed as ``ln prior + k·(m − ln prior)`` with ``k = (w/σ_o²) / (1/σ_p² + w/σ_o²)``
    (the same value; exactly ``ln prior`` when the samples agree with the prior, so a learned
    profile over a right prior decides bit for bit as the prior). With no sample: ``ln prior``."""
    prior_log = math.log(prior_value)
    if stats is None or stats.count == 0:
        return prior_log
    obs_var = max(OBS_SIGMA_MIN, stats.spread) ** 2
    prior_precision = 1.0 / (prior_sigma * prior_sigma)
    data_precision = stats.weight / obs_var
    gain = data_precision / (prior_precision + data_precision)
    return prior_log + gain * (stats.mean_log - prior_log)


@dataclass(frozen=True, slots=True)
class Estimate:
    """One estimate with its evidence: ``value`` (s or ``ξ``), ``source`` (``measured``,
    ``learned``, ``declared``, ``profile``; for slowdowns ``learned``, ``measured`` (the shipped
    table's pair), ``predicted``, ``default``), ``count`` samples and their ``spread``
    (standard deviation of ``ln`` samples)."""

    value: float
    source: str
    count: int = 0
    spread: float = 0.0


@dataclass(frozen=True, slots=True)
class Knowledge:
    """What the learned profile knows, as immutable maps (a round's view; :class:`Learner`
    builds it in the simulator, the service reads it from the database).

    ``slowdowns``: :data:`PairKey` → samples of ``ξ``; ``incompatible``: unordered pairs
    (:func:`pair_id`) that ran out of memory together; ``memory_seen``: models whose memory use was
    measured (so they may share even without a declared memory). Iteration times are not here:
    the driver folds them into each job's ``iter_time_s`` (:func:`choose_iter_time`).
    """

    slowdowns: Mapping[PairKey, SampleStats] = field(default_factory=dict)
    incompatible: frozenset[PairKey] = frozenset()
    memory_seen: frozenset[str] = frozenset()


EMPTY = Knowledge()
"""Nothing learned yet."""


def choose_iter_time(
    job_stats: SampleStats | None,
    class_stats: SampleStats | None,
    declared_s: float | None,
    profile_s: float,
) -> Estimate:
    """The exclusive iteration time ``t_j(B_j)`` (s) a round uses, by the order of trust (module
    docstring): measured for this job; learned for its class (≥ :data:`MIN_CLASS_SAMPLES`
    samples, and over a declared time only with a spread ≤ :data:`MAX_CLASS_SPREAD`); declared;
    the profile's estimate ``profile_s``."""
    if job_stats is not None and job_stats.count:
        return Estimate(job_stats.mean, "measured", job_stats.count, job_stats.spread)
    if (
        class_stats is not None
        and class_stats.count >= MIN_CLASS_SAMPLES
        and (declared_s is None or class_stats.spread <= MAX_CLASS_SPREAD)
    ):
        return Estimate(class_stats.mean, "learned", class_stats.count, class_stats.spread)
    if declared_s is not None:
        return Estimate(declared_s, "declared")
    return Estimate(profile_s, "profile")


def full_batch_time_s(profile: Profile, job: Job, sub_batch: int, measured_s: float) -> float:
    """A measured exclusive iteration time at ``sub_batch`` (s) brought to the full global batch:
    ``t(B) = t(b) · t_p(B) / t_p(b)`` with ``t_p`` the profile's samples/s curve (MODEL.md §1)."""
    if sub_batch == job.batch_size:
        return measured_s
    ratio = profile.iter_time_s(job, sub_batch) / profile.iter_time_s(job, job.batch_size)
    return measured_s / ratio


class SlowdownPrior(Profile, Protocol):
    """What the learned profile needs of the shipped one besides :class:`Profile`: where its
    ``ξ`` comes from (``TableProfile.slowdown_source``)."""

    def slowdown_source(self, a: Job, sub_a: int, b: Job, sub_b: int) -> str:
        """``"measured"``, ``"predicted"`` or ``"default"`` for ``ξ_a`` beside ``b``."""
        ...


class LearnedProfile:
    """A :class:`~scheduling.core.types.Profile` layered over ``base`` with :class:`Knowledge`.

    - ``iter_time_s``, ``sub_batches``: the base's (the iteration time a job carries is already
      chosen by :func:`choose_iter_time` when the snapshot is built);
    - ``memory_mb``: the base's; :meth:`memory_known` is True also for measured models;
    - ``slowdown``: the posterior of the module docstring per side, over the base's ``ξ``;
    - :meth:`pair_allowed`: False for an incompatible pair, and for an unknown one (no sample,
      the base's guessed default) unless ``unknown_ok``;
    - :meth:`slowdown_estimate`: the same ``ξ`` with its source, count and spread (the API and
      the dashboard show it).

    Immutable: build a new one when the knowledge changes (policies memoise profile answers per
    profile object). Raises what ``base`` raises.
    """

    def __init__(self, base: SlowdownPrior, knowledge: Knowledge = EMPTY) -> None:
        self.base = base
        self.knowledge = knowledge
        self._xi: dict[tuple[str, int, str, int], tuple[float, float]] = {}

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        """``t_j(b)`` (s), the base profile's."""
        return self.base.iter_time_s(job, sub_batch)

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        """``mem_j(b)`` (MB per GPU), the base profile's."""
        return self.base.memory_mb(job, sub_batch)

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        """Feasible sub-batch sizes, largest first, the base profile's."""
        return self.base.sub_batches(job, min_sub_batch)

    def memory_known(self, job: Job) -> bool:
        """Declared, in the base table, or measured for the job's model."""
        return normalise_model(job.model) in self.knowledge.memory_seen or self.base.memory_known(job)

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        """``(ξ_a, ξ_b)``: the posterior estimates (module docstring), memoised."""
        key = (a.model, sub_a, b.model, sub_b)
        pair = self._xi.get(key)
        if pair is None:
            ea, eb = self.slowdown_estimate(a, sub_a, b, sub_b)
            pair = self._xi[key] = (ea.value, eb.value)
        return pair

    def slowdown_estimate(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[Estimate, Estimate]:
        """``(ξ_a, ξ_b)`` as :class:`Estimate` objects: ``source`` is ``learned`` once a sample of
        that side exists, else the base's source (``measured``, ``predicted``, ``default``)."""
        prior_a, prior_b = self.base.slowdown(a, sub_a, b, sub_b)
        ka, kb = side_key(a, sub_a), side_key(b, sub_b)
        return (
            self._side(prior_a, self.base.slowdown_source(a, sub_a, b, sub_b), (ka, kb)),
            self._side(prior_b, self.base.slowdown_source(b, sub_b, a, sub_a), (kb, ka)),
        )

    def _side(self, prior: float, source: str, key: PairKey) -> Estimate:
        stats = self.knowledge.slowdowns.get(key)
        if stats is None or stats.count == 0:
            return Estimate(prior, source)
        # prior · exp(shift) rather than exp(ln ξ̂): exactly the prior when the samples agree with it
        shift = posterior_log(prior, PRIOR_SIGMA.get(source, 1.0), stats) - math.log(prior)
        return Estimate(prior * math.exp(shift), "learned", stats.count, stats.spread)

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        """Whether ``a`` at ``sub_a`` may share a GPU with ``b`` at ``sub_b``: never after an
        out-of-memory of that pair; not while either ``ξ`` is unknown (no sample, the base's guessed
        default) unless ``unknown_ok``."""
        ka, kb = side_key(a, sub_a), side_key(b, sub_b)
        if pair_id(ka, kb) in self.knowledge.incompatible:
            return False
        if unknown_ok:
            return True
        return all(e.source != "default" for e in self.slowdown_estimate(a, sub_a, b, sub_b))

    def slowdown_source(self, a: Job, sub_a: int, b: Job, sub_b: int) -> str:
        """Where ``ξ_a`` beside ``b`` comes from: ``learned`` or the base's source."""
        return self.slowdown_estimate(a, sub_a, b, sub_b)[0].source


class Learner:
    """Accumulates measurements (the simulator's memory; the service keeps the same summaries in
    the database). Mutable. :meth:`knowledge` returns an immutable view of the slowdowns, rebuilt
    only after one changed materially (:attr:`version`, :data:`PUBLISH_TOL`): the view holds each
    pair's summary as last published; :meth:`iter_time` the iteration time by the order of
    trust."""

    def __init__(self) -> None:
        self.jobs: dict[JobId, SampleStats] = {}
        self.classes: dict[IterKey, SampleStats] = {}
        self.slowdowns: dict[PairKey, SampleStats] = {}
        self.incompatible: set[PairKey] = set()
        self.memory_seen: set[str] = set()
        self.version = 0
        self._view: tuple[int, Knowledge] | None = None
        self._published: dict[PairKey, SampleStats] = {}

    def observe_exclusive(self, job: Job, full_batch_s: float) -> None:
        """``job`` ran alone at ``t_j(B_j) = full_batch_s`` (s, :func:`full_batch_time_s`): a sample
        of the job, and — its first only — of its class (module docstring)."""
        own = self.jobs.get(job.id, SampleStats())
        self.jobs[job.id] = own.add(full_batch_s)
        if own.count == 0:
            key = iter_key(job)
            self.classes[key] = self.classes.get(key, SampleStats()).add(full_batch_s)

    def iter_time(self, job: Job, declared_s: float | None, profile_s: float) -> Estimate:
        """:func:`choose_iter_time` for ``job`` from what was observed."""
        return choose_iter_time(self.jobs.get(job.id), self.classes.get(iter_key(job)), declared_s, profile_s)

    def observe_slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int, xi_a: float) -> None:
        """``a`` at ``sub_a`` ran ``xi_a`` times slower beside ``b`` at ``sub_b`` than alone."""
        key = (side_key(a, sub_a), side_key(b, sub_b))
        stats = self.slowdowns[key] = self.slowdowns.get(key, SampleStats()).add(xi_a)
        shown = self._published.get(key)
        if (
            shown is None
            or abs(stats.mean_log - shown.mean_log) > PUBLISH_TOL
            or abs(stats.spread - shown.spread) > PUBLISH_TOL
            or stats.weight > shown.weight * PUBLISH_WEIGHT_RATIO
        ):
            self._published[key] = stats
            self.version += 1

    def observe_memory(self, job: Job) -> None:
        """The memory use of ``job``'s model was measured (it may share even without a declared
        memory, :meth:`LearnedProfile.memory_known`). Changes the knowledge only the first time."""
        model = normalise_model(job.model)
        if model not in self.memory_seen:
            self.memory_seen.add(model)
            self.version += 1

    def mark_incompatible(self, a: Job, sub_a: int, b: Job, sub_b: int) -> None:
        """``a`` at ``sub_a`` and ``b`` at ``sub_b`` ran out of memory together (the knowledge
        changes only the first time)."""
        pair = pair_id(side_key(a, sub_a), side_key(b, sub_b))
        if pair not in self.incompatible:
            self.incompatible.add(pair)
            self.version += 1

    def knowledge(self) -> Knowledge:
        """An immutable view of the slowdowns learned (the same object until one changes)."""
        if self._view is None or self._view[0] != self.version:
            view = Knowledge(dict(self._published), frozenset(self.incompatible), frozenset(self.memory_seen))
            self._view = (self.version, view)
        return self._view[1]
