"""A tiny hand-written profile for policy tests: every number is explicit, so expected decisions
can be computed by hand (no dependency on the real profile table)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduling.core.types import Job


@dataclass
class FakeProfile:
    """Implements :class:`scheduling.core.types.Profile` from small dicts.

    - ``iter_time_s(job, b) = job.iter_time_s × step_factor[(model, b)]`` (default factor 1 at the
      full batch, ``1 + accum_overhead × (B/b − 1)`` below it: each extra micro-step costs a
      fraction of an iteration);
    - ``memory_mb(job, b) = static + per_sample × b`` from ``memory[model]``
      (default ``(1000, 0)``);
    - ``slowdown(a, _, b, _) = slowdowns[(a.model, b.model)]``, or reversed from
      ``slowdowns[(b.model, a.model)]``, else ``(default_xi, default_xi)``; a per-sub-batch entry
      ``slowdowns[(a.model, sub_a, b.model, sub_b)]`` wins when present;
    - ``sub_batches``: powers of two dividing the batch, largest first, down to ``min_sub_batch``;
    - ``memory_known``: False for the models in ``unknown_memory``;
    - ``pair_allowed``: False for ``(model_a, sub_a, model_b, sub_b)`` in ``incompatible`` (either
      order), and, unless ``unknown_ok``, for the model pairs in ``unknown_pairs`` (either order).
    """

    memory: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    slowdowns: Mapping[tuple, tuple[float, float]] = field(default_factory=dict)
    step_factor: Mapping[tuple[str, int], float] = field(default_factory=dict)
    default_xi: float = 1.3
    accum_overhead: float = 0.1
    unknown_memory: frozenset[str] = frozenset()
    incompatible: frozenset[tuple[str, int, str, int]] = frozenset()
    unknown_pairs: frozenset[tuple[str, str]] = frozenset()

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        factor = self.step_factor.get((job.model, sub_batch))
        if factor is None:
            factor = 1 + self.accum_overhead * (job.batch_size / sub_batch - 1)
        return job.iter_time_s * factor

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        static, per_sample = self.memory.get(job.model, (1000.0, 0.0))
        return static + per_sample * sub_batch

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        subs = []
        b = 1
        while b <= job.batch_size:
            if job.batch_size % b == 0 and b >= min_sub_batch:
                subs.append(b)
            b *= 2
        if job.batch_size not in subs:
            subs.append(job.batch_size)
        return tuple(sorted(subs, reverse=True))

    def memory_known(self, job: Job) -> bool:
        return job.model not in self.unknown_memory

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        pair = (a.model, sub_a, b.model, sub_b)
        if pair in self.incompatible or (b.model, sub_b, a.model, sub_a) in self.incompatible:
            return False
        unknown = (a.model, b.model) in self.unknown_pairs or (b.model, a.model) in self.unknown_pairs
        return unknown_ok or not unknown

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        exact = self.slowdowns.get((a.model, sub_a, b.model, sub_b))
        if exact is not None:
            return exact
        pair = self.slowdowns.get((a.model, b.model))
        if pair is not None:
            return pair
        swapped = self.slowdowns.get((b.model, a.model))
        if swapped is not None:
            return swapped[1], swapped[0]
        return self.default_xi, self.default_xi


def job(
    job_id: int,
    *,
    gpus: int = 1,
    model: str = "m",
    batch: int = 32,
    iterations: int = 100,
    iter_time_s: float = 1.0,
    submit: float = 0.0,
    done: float = 0.0,
    attained: float = 0.0,
    queued_since: float | None = None,
    tenant: str = "t",
) -> Job:
    """A job with short keyword names for tests (remaining time = (iterations − done) × iter_time_s)."""
    return Job(
        id=job_id,
        tenant=tenant,
        model=model,
        batch_size=batch,
        gpus=gpus,
        iterations=iterations,
        submit_time=submit,
        iter_time_s=iter_time_s,
        iterations_done=done,
        attained_gpu_s=attained,
        queued_since=queued_since,
    )
