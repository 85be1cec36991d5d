"""How a GPU's time is charged to the jobs on it: the normalised split (pure Python).

docs/FAIRNESS.md §3 **(ours)**. A GPU held by one job charges it 1 GPU-s per second. A GPU shared
by jobs ``a`` and ``b`` is split by their *normalised progress*: each job progresses at ``1/ξ`` of
its exclusive speed (``ξ`` its pairwise slowdown, MODEL.md §2), so ``a`` is charged
``(1/ξ_a) / (1/ξ_a + 1/ξ_b) = ξ_b / (ξ_a + ξ_b)`` and ``b`` the rest; the shares of a GPU sum to 1.
One rule for the accounting (simulator, dashboard), for quota use (:func:`tenant_charge`, read by
``sjf-bsbf-fair``'s quota gate and reclaim) and for the windows of :mod:`scheduling.core.usage`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from scheduling.core.types import JobId, Profile, RunningJob


def charge_split(xi_a: float, xi_b: float) -> tuple[float, float]:
    """``(w_a, w_b)``: the shares of one shared GPU-second charged to jobs ``a`` and ``b``.

    ``w_a = (1/ξ_a) / (1/ξ_a + 1/ξ_b) = ξ_b / (ξ_a + ξ_b)``, ``w_b = 1 − w_a`` (normalised
    progress, module docstring). ``split(1.2, 1.2) == (0.5, 0.5)``; ``split(1, 3) == (0.75, 0.25)``:
    the job slowed down less made more progress and pays more. Raises ``ValueError`` for a
    non-positive or non-finite slowdown.
    """
    if not (math.isfinite(xi_a) and math.isfinite(xi_b) and xi_a > 0 and xi_b > 0):
        raise ValueError(f"slowdowns must be positive and finite, got ξ_a={xi_a}, ξ_b={xi_b}")
    w_a = xi_b / (xi_a + xi_b)
    return w_a, 1.0 - w_a


def charge_rates(
    occupancy: Iterable[Sequence[JobId]], pair_slowdown: Callable[[JobId, JobId], float]
) -> dict[JobId, float]:
    """GPU-seconds charged per second to each job, given who holds each GPU.

    ``occupancy``: for every busy GPU, the ids of the (one or two) jobs on it;
    ``pair_slowdown(a, b)``: ``ξ_a`` of job ``a`` when it shares with ``b``. A GPU alone charges
    its job 1; a shared GPU is split by :func:`charge_split`. The rates sum to the number of busy
    GPUs. Raises ``ValueError`` for a GPU listing no job or more than two.
    """
    rates: dict[JobId, float] = {}
    for jobs in occupancy:
        if len(jobs) == 1:
            rates[jobs[0]] = rates.get(jobs[0], 0.0) + 1.0
        elif len(jobs) == 2:
            a, b = jobs
            w_a, w_b = charge_split(pair_slowdown(a, b), pair_slowdown(b, a))
            rates[a] = rates.get(a, 0.0) + w_a
            rates[b] = rates.get(b, 0.0) + w_b
        else:
            raise ValueError(f"a busy GPU holds one or two jobs, got {len(jobs)}")
    return rates


def gpu_shares(running: Sequence[RunningJob], profile: Profile) -> dict[int, dict[JobId, float]]:
    """GPU id → {running job id → the share of that GPU's time it is charged now}: 1 for a job
    alone, :func:`charge_split` of the pair's ``ξ`` (``profile.slowdown`` at the two placements'
    sub-batches) for two. Raises ``ValueError`` for a GPU listed by more than two jobs."""
    by_id = {rj.job.id: rj for rj in running}
    on_gpu: dict[int, list[JobId]] = {}
    for rj in running:
        for g in rj.placement.gpu_ids:
            on_gpu.setdefault(g, []).append(rj.job.id)
    xi: dict[tuple[JobId, JobId], tuple[float, float]] = {}
    out: dict[int, dict[JobId, float]] = {}
    for g, jobs in on_gpu.items():
        if len(jobs) == 1:
            out[g] = {jobs[0]: 1.0}
        elif len(jobs) == 2:
            a, b = jobs
            if (a, b) not in xi:
                ra, rb = by_id[a], by_id[b]
                xa, xb = profile.slowdown(ra.job, ra.placement.sub_batch, rb.job, rb.placement.sub_batch)
                xi[(a, b)] = charge_split(float(xa), float(xb))
            w_a, w_b = xi[(a, b)]
            out[g] = {a: w_a, b: w_b}
        else:
            raise ValueError(f"a busy GPU holds one or two jobs, got {len(jobs)}")
    return out


def running_charges(running: Sequence[RunningJob], profile: Profile) -> dict[JobId, float]:
    """Running job id → GPU-s charged per second now (its normalised GPUs: :func:`gpu_shares`
    summed over its GPUs); a job alone on all its GPUs is charged its gang ``G_j``."""
    rates: dict[JobId, float] = {}
    for shares in gpu_shares(running, profile).values():
        for jid, w in shares.items():
            rates[jid] = rates.get(jid, 0.0) + w
    return rates


def tenant_charge(running: Sequence[RunningJob], profile: Profile) -> dict[str, float]:
    """Tenant → normalised GPUs its running jobs are charged now (:func:`running_charges` summed):
    the quota use of ``sjf-bsbf-fair``. Equals the sum of gangs when no GPU is shared."""
    usage: dict[str, float] = {}
    rates = running_charges(running, profile)
    for rj in running:
        usage[rj.job.tenant] = usage.get(rj.job.tenant, 0.0) + rates.get(rj.job.id, 0.0)
    return usage
