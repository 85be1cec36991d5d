"""The placement questions of an agent event as they were first written, one query set each: the
from-scratch reference that ``placement_facts.JobPlacements`` (the job's rows read once) must
answer exactly as (tests/service/test_report_cost.py). Rules: docs/AGENT.md §1–2 and
:mod:`scheduling.service.generations`."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Count, F, Max, Q

from cluster.expressions import AnyOf
from cluster.models import JobEvent, Placement
from scheduling.service.generations import latest_generation


def latest_placement_nodes(job_id: int) -> set[str]:
    """Names of the nodes of the job's latest placement: those whose rows carry its highest
    generation (the nodes it last ran on, or was last told to stop on)."""
    latest = latest_generation(job_id)
    if latest is None:
        return set()
    rows = Placement.objects.filter(job_id=job_id, generation=latest)
    return set(rows.values_list("gpu__node__name", flat=True))


def generation_window(job_id: int) -> tuple[int, int] | None:
    """``(floor, latest)`` of AGENT.md §2 for a job, ``None`` if no message was ever sent for it
    (:func:`generation_windows` of that one job)."""
    return generation_windows([job_id]).get(job_id)


def generation_windows(job_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """``{job id: (floor, latest)}`` of AGENT.md §2 for each of ``job_ids`` that was ever sent a
    message (absent: none); 3 queries for any number of jobs (a heartbeat's running jobs).

    ``latest``: the highest generation of any of its placement rows (every message sent raises
    it). ``floor``: the last ``start`` or ``stop`` sent — while the job holds GPUs, the generation
    of its latest ``placed`` event (updates do not raise the floor); otherwise ``latest`` (its
    rows carry the stop's generation, or the last one sent before it ended).
    """
    ids = list(job_ids)
    if not ids:
        return {}
    rows = (
        Placement.objects.filter(AnyOf(F("job_id"), ids))
        .order_by()
        .values("job_id")
        .annotate(g=Max("generation"), held=Count("pk", filter=Q(active=True)))
        .values_list("job_id", "g", "held")
    )
    latest = {pk: (int(g), bool(held)) for pk, g, held in rows}
    holding = [pk for pk, (_, held) in latest.items() if held]
    placed_ids = (
        JobEvent.objects.filter(AnyOf(F("job_id"), holding), kind=JobEvent.Kind.PLACED)
        .order_by()
        .values("job_id")
        .annotate(last=Max("id"))
        .values_list("last", flat=True)
        if holding
        else []
    )
    floors: dict[int, int] = {}
    for pk, data in JobEvent.objects.filter(id__in=list(placed_ids)).values_list("job_id", "data"):
        if isinstance(data, dict) and "generation" in data:
            floors[pk] = int(data["generation"])
    windows: dict[int, tuple[int, int]] = {}
    for pk, (g, held) in latest.items():
        floor = floors.get(pk, g) if held else g
        windows[pk] = (min(floor, g), g)
    return windows
