"""A profile whose co-location slowdowns are off by a stated error: the simulator's experiment of
belief vs truth (issue 10, docs/LEARNING.md §5). Pure Python.

Every ordered pair of job types gets a factor ``f ∈ [1 − E, 1 + E]``, uniform, drawn from a hash of
``(salt, seed, type_a, type_b)`` — so it depends neither on the order of the queries nor on the
trace — and ``ξ' = max(1, f · ξ)`` with ``ξ`` the base table's (measured pair, predictor or
default). A job type is the base table's Gavel job type of the job's model at its sub-batch
(``TableProfile.job_type_for``), or the model's name for a family it does not know. Everything
else (iteration times, memory, sub-batches, where ``ξ`` came from) is the base table's.

Used as the policy's prior (``--prior-error E``: the truth is the shipped table, the belief starts
off by up to ``E``) or as the truth (``--truth-error E``: the jobs' real slowdowns differ from the
shipped table the policy starts from; what the live demo's emulated jobs can do with the same
seed). The two roles draw from different salts, so both options together give independent errors.
"""

from __future__ import annotations

import hashlib
import math

from scheduling.core.profiles import TableProfile, normalise_model_name
from scheduling.core.types import Job

SALTS = ("prior", "truth")
"""The roles a perturbed table plays; each draws its own factors."""


def perturbation_factor(error: float, seed: int, salt: str, type_a: str, type_b: str) -> float:
    """``f ∈ [1 − error, 1 + error]``, uniform in ``blake2b(salt, seed, type_a, type_b)``: the same
    for the same arguments on every machine and in every run. Raises ``ValueError`` for an error
    outside ``[0, 1)``."""
    if not (0.0 <= error < 1.0 and math.isfinite(error)):
        raise ValueError(f"a slowdown error must be in [0, 1), got {error!r}")
    digest = hashlib.blake2b(f"{salt}\x1f{seed}\x1f{type_a}\x1f{type_b}".encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "big") / 2.0**64
    return 1.0 - error + 2.0 * error * u


class PerturbedProfile:
    """The :class:`~scheduling.core.profiles.TableProfile` ``base`` with every ``ξ`` multiplied by
    :func:`perturbation_factor` (module docstring); a :class:`~scheduling.core.types.Profile` and
    a ``SlowdownPrior`` (``slowdown_source`` is the base's). ``error`` in ``[0, 1)``, ``salt`` one
    of :data:`SALTS`. Raises ``ValueError`` otherwise."""

    def __init__(self, base: TableProfile, error: float, seed: int, salt: str = "prior") -> None:
        if salt not in SALTS:
            raise ValueError(f"salt must be one of {', '.join(SALTS)}, got {salt!r}")
        perturbation_factor(error, seed, salt, "", "")  # checks the error
        self.base = base
        self.error = error
        self.seed = seed
        self.salt = salt
        self._xi: dict[tuple[str, int, str, int], tuple[float, float]] = {}

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        """``t_j(b)`` (s), the base's."""
        return self.base.iter_time_s(job, sub_batch)

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        """``mem_j(b)`` (MB per GPU), the base's."""
        return self.base.memory_mb(job, sub_batch)

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        """Feasible sub-batch sizes, largest first, the base's."""
        return self.base.sub_batches(job, min_sub_batch)

    def memory_known(self, job: Job) -> bool:
        """The base's answer."""
        return self.base.memory_known(job)

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        """The base's answer (the error changes values, not what is known)."""
        return self.base.pair_allowed(a, sub_a, b, sub_b, unknown_ok)

    def slowdown_source(self, a: Job, sub_a: int, b: Job, sub_b: int) -> str:
        """Where the base's ``ξ_a`` came from (``measured``, ``predicted``, ``default``)."""
        return self.base.slowdown_source(a, sub_a, b, sub_b)

    def job_type(self, job: Job, sub_batch: int) -> str:
        """The job type the factors are drawn for: the base's Gavel job type, or the model's
        normalised name for an unknown family."""
        return self.base.job_type_for(job.model, sub_batch) or normalise_model_name(job.model)

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        """``(ξ'_a, ξ'_b) = (max(1, f_ab · ξ_a), max(1, f_ba · ξ_b))``, memoised."""
        key = (a.model, sub_a, b.model, sub_b)
        pair = self._xi.get(key)
        if pair is None:
            xi_a, xi_b = self.base.slowdown(a, sub_a, b, sub_b)
            type_a, type_b = self.job_type(a, sub_a), self.job_type(b, sub_b)
            f_ab = perturbation_factor(self.error, self.seed, self.salt, type_a, type_b)
            f_ba = perturbation_factor(self.error, self.seed, self.salt, type_b, type_a)
            pair = self._xi[key] = (max(1.0, f_ab * xi_a), max(1.0, f_ba * xi_b))
        return pair
