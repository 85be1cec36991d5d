"""A per-round memo of a performance profile's answers (pure Python).

Policies ask the same questions of the profile many times in one round (every waiting job against
every resident); :class:`CachedProfile` answers each distinct question once. It changes no answer.
"""

from __future__ import annotations

from operator import attrgetter

from scheduling.core.types import Job, Profile

ANSWER_FIELDS = ("model", "batch_size", "memory_mb")
"""The job fields a :class:`~scheduling.core.types.Profile`'s answers depend on (its contract),
besides ``iter_time_s`` for iteration times: not the job's gang size, id, tenant or progress."""

answer_key = attrgetter(*ANSWER_FIELDS)
"""``job → (model, batch_size, memory_mb)``, the :data:`ANSWER_FIELDS` as one tuple (built in C).
Two jobs with the same key get the same memory, sub-batches, slowdowns and pair verdicts from
every profile, whatever their gang sizes."""

FIT_FIELDS = ("model", "batch_size", "gpus", "memory_mb", "gpu_types")
"""The job fields whether a job can ever start depends on: its shape (:meth:`CachedProfile.shape`,
which fixes its memory per GPU at every sub-batch) and the GPU types it accepts."""

fit_key = attrgetter(*FIT_FIELDS)
"""``job → (model, batch_size, gpus, memory_mb, gpu_types)``, the :data:`FIT_FIELDS` as one tuple
(built in C: a per-round cache keyed by it costs one call per job)."""


class CachedProfile:
    """A memoising wrapper around a :class:`~scheduling.core.types.Profile` for one round.

    Answers are cached by the job fields a profile may depend on (:data:`ANSWER_FIELDS`:
    ``(model, batch_size, memory_mb)``, written out in each key for speed) for memory, sub-batches
    and slowdowns, plus ``iter_time_s`` for iteration times. A profile whose answers depend on
    anything else of a job (its gang size, id, tenant, progress) breaks the Profile contract and
    must not be wrapped. Raises whatever the wrapped profile raises.
    """

    __slots__ = ("_inner", "_iter", "_mem", "_subs", "_xi", "_known", "_pairs")

    def __init__(self, inner: Profile) -> None:
        self._inner = inner
        self._iter: dict[tuple, float] = {}
        self._mem: dict[tuple, float] = {}
        self._subs: dict[tuple, tuple[int, ...]] = {}
        self._xi: dict[tuple, tuple[float, float]] = {}
        self._known: dict[tuple, bool] = {}
        self._pairs: dict[tuple, bool] = {}

    @staticmethod
    def shape(job: Job) -> tuple:
        """The key of whether a job fits some GPUs: ``(model, batch_size, gpus, memory_mb)`` (its
        gang size too; the profile's answers alone: :data:`answer_key`)."""
        return (job.model, job.batch_size, job.gpus, job.memory_mb)

    @property
    def size(self) -> int:
        """Number of answers cached."""
        return len(self._iter) + len(self._mem) + len(self._subs) + len(self._xi)

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        """``t_j(b)`` (s), memoised."""
        key = (job.model, job.batch_size, job.memory_mb, job.iter_time_s, sub_batch)
        value = self._iter.get(key)
        if value is None:
            value = self._iter[key] = self._inner.iter_time_s(job, sub_batch)
        return value

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        """``mem_j(b)`` (MB per GPU), memoised."""
        key = (job.model, job.batch_size, job.memory_mb, sub_batch)
        value = self._mem.get(key)
        if value is None:
            value = self._mem[key] = self._inner.memory_mb(job, sub_batch)
        return value

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        """Feasible sub-batch sizes, largest first, memoised."""
        key = (job.model, job.batch_size, job.memory_mb, min_sub_batch)
        value = self._subs.get(key)
        if value is None:
            value = self._subs[key] = tuple(self._inner.sub_batches(job, min_sub_batch))
        return value

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        """``(ξ_a, ξ_b)``, memoised."""
        key = (
            a.model,
            a.batch_size,
            a.memory_mb,
            sub_a,
            b.model,
            b.batch_size,
            b.memory_mb,
            sub_b,
        )
        value = self._xi.get(key)
        if value is None:
            xi_a, xi_b = self._inner.slowdown(a, sub_a, b, sub_b)
            value = self._xi[key] = (xi_a, xi_b)
        return value

    def memory_known(self, job: Job) -> bool:
        """Whether the job's memory is known, memoised by :data:`answer_key`."""
        key = answer_key(job)
        value = self._known.get(key)
        if value is None:
            value = self._known[key] = self._inner.memory_known(job)
        return value

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        """Whether the pair may share at all, memoised by models and sub-batches."""
        key = (a.model, sub_a, b.model, sub_b, unknown_ok)
        value = self._pairs.get(key)
        if value is None:
            value = self._pairs[key] = self._inner.pair_allowed(a, sub_a, b, sub_b, unknown_ok)
        return value


def cached(profile: Profile) -> CachedProfile:
    """``profile`` wrapped in a fresh :class:`CachedProfile` (unless it already is one)."""
    return profile if isinstance(profile, CachedProfile) else CachedProfile(profile)
