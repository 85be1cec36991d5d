"""Generations of the messages sent about a job (docs/AGENT.md §1–2).

Every change sent for a job gets ``1 +`` the highest generation any ``Placement`` row of that job
ever carried. A placement row's ``generation`` is the latest one sent about the job on that GPU:
an ``update`` (the partner changed) raises it on the active rows, and a ``stop`` (preemption)
writes it on the rows it deactivates, so the next ``start`` is always higher. Each message of a
round is also recorded in a ``JobEvent``'s ``data["generation"]`` (``placed`` for a start,
``preempted`` for a stop; updates are not job events), so the *floor* of AGENT.md §2 (the last
start or stop sent) is the ``placed`` generation while the job holds GPUs, else the highest
generation of its rows. An agent's report is accepted iff ``floor ≤ generation ≤ latest``
(:meth:`scheduling.service.placement_facts.JobPlacements.window`, from the job's rows read once).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import F, Max

from cluster.expressions import AnyOf
from cluster.models import Placement


def next_generations(job_ids: Iterable[int]) -> dict[int, int]:
    """``1 +`` the highest generation any placement row of each job carries (1 for a new job)."""
    ids = list(job_ids)
    if not ids:
        return {}
    highest = dict(
        Placement.objects.filter(AnyOf(F("job_id"), ids))
        .order_by()
        .values("job_id")
        .annotate(g=Max("generation"))
        .values_list("job_id", "g")
    )
    return {pk: highest.get(pk, 0) + 1 for pk in ids}


def latest_generation(job_id: int) -> int | None:
    """The highest generation of any placement row of the job (``None``: never placed)."""
    return Placement.objects.filter(job_id=job_id).aggregate(g=Max("generation"))["g"]
