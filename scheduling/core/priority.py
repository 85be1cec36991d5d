"""Priority classes within a tenant (pure Python; docs/PRIORITY.md, **ours** after Kueue's
WorkloadPriorityClass and Slurm's QOS priority).

``Job.priority`` is an int, higher first; 0 by default. Priority orders a tenant's *own* waiting
jobs: the slots a tenant's jobs hold in a policy's order (SJF's ``P_j``, FIFO's arrival, the fair
policy's aged key) stay where they are, and the tenant's jobs are dealt into them highest priority
first, the policy's order breaking ties. Across tenants priority changes nothing here, so a tenant
cannot jump the queue by marking every job urgent; across tenants it acts only through preemption
of *borrowed* work (:mod:`scheduling.core.reclaim`), never below a tenant's guarantee.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.core.types import Job


def by_priority_within_tenants(order: Iterable[Job]) -> list[Job]:
    """``order`` with each tenant's jobs re-dealt into that tenant's positions by
    ``(−priority, position in order)``; the same list when every job has the same priority.

    ``[a1(p0), b1, a2(p5)]`` → ``[a2, b1, a1]``: tenant a keeps positions 0 and 2, b keeps 1.
    Idempotent; O(n log n).
    """
    jobs = list(order)
    if len({j.priority for j in jobs}) <= 1:
        return jobs
    slots: dict[str, list[int]] = {}
    for i, j in enumerate(jobs):
        slots.setdefault(j.tenant, []).append(i)
    out = list(jobs)
    for positions in slots.values():
        ranked = sorted(positions, key=lambda i: (-jobs[i].priority, i))
        for slot, i in zip(positions, ranked, strict=True):
            out[slot] = jobs[i]
    return out
