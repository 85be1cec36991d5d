"""What one agent event needs to know of its job's placement rows, read once.

Why: applying one event (:func:`scheduling.service.record_event`) asked the placement table the
same question several times — was the job ever placed on this node (403), its generation window
(3 queries), the nodes holding it (twice), those of its latest placement, its sub-batch, its rows
and latest generation for the learning — about ten queries per event, the largest share of the
agents' report path end to end (docs/PERFORMANCE.md §10). :func:`job_placements` reads every
placement row of the job once (one query, the floor's ``placed`` event riding on it) after the
job's row is locked, and each question is answered from those rows with the same rule as the
query it replaces (:mod:`scheduling.service.generations`, ``jobs.job_nodes``).

The answers hold while the job's row stays locked and until the event itself changes its
placements (a release); callers read it once per event, after the lock.

Units: generations (integers), MB none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import F, Max, Subquery

from cluster.expressions import AnyOf
from cluster.models import JobEvent, Placement


@dataclass(frozen=True, slots=True)
class PlacementRow:
    """One placement row of the job: its node (id and name), whether it is active, its
    ``generation``, GPU, ``sub_batch``, ``shared_with`` (the partner's job id) and
    ``predicted_slowdown``."""

    node_id: int
    node: str
    active: bool
    generation: int
    gpu_id: int
    sub_batch: int
    shared_with: int | None
    predicted_slowdown: float | None


@dataclass(frozen=True, slots=True)
class JobPlacements:
    """Every placement row of one job, by id, and ``placed_generation``: the generation of its
    latest ``placed`` event while it holds GPUs (``None``: it holds none, or the event carries no
    generation)."""

    rows: tuple[PlacementRow, ...]
    placed_generation: int | None

    def placed_on(self, node_id: int) -> bool:
        """Whether any row, active or not, was on node ``node_id`` (the 403 rule of AGENT.md §2)."""
        return any(r.node_id == node_id for r in self.rows)

    def latest(self) -> int | None:
        """The highest generation of any row (``generations.latest_generation``)."""
        return max((r.generation for r in self.rows), default=None)

    def window(self) -> tuple[int, int] | None:
        """``(floor, latest)`` of AGENT.md §2, the rule of :mod:`scheduling.service.generations`:
        ``floor`` is the latest ``placed`` generation while the job holds GPUs, else ``latest``;
        ``None``: never placed."""
        latest = self.latest()
        if latest is None:
            return None
        floor = latest
        if self.active() and self.placed_generation is not None:
            floor = self.placed_generation
        return min(floor, latest), latest

    def active(self) -> list[PlacementRow]:
        """The active rows, by id."""
        return [r for r in self.rows if r.active]

    def active_nodes(self) -> set[str]:
        """Names of the nodes holding the job's active rows (``jobs.job_nodes``)."""
        return {r.node for r in self.rows if r.active}

    def latest_nodes(self) -> set[str]:
        """Names of the nodes of the latest placement (those whose rows carry the highest generation)."""
        latest = self.latest()
        return {r.node for r in self.rows if r.generation == latest}


ROW_FIELDS = (
    "gpu__node_id",
    "gpu__node__name",
    "active",
    "generation",
    "gpu_id",
    "sub_batch",
    "shared_with",
    "predicted_slowdown",
)


def job_placements(job_id: int) -> JobPlacements:
    """The placement rows of job ``job_id`` (:class:`JobPlacements`) and its latest ``placed``
    event's generation, in one query. Read it after locking the job's row."""
    # the latest ``placed`` event's data rides on every row (a subquery the database runs once:
    # it depends on nothing of the row), so the rows and the floor take one statement, not two
    latest_placed = (
        JobEvent.objects.filter(job_id=job_id, kind=JobEvent.Kind.PLACED).order_by("-id").values("data")[:1]
    )
    found = (
        Placement.objects.filter(job_id=job_id)
        .order_by("id")
        .annotate(placed_data=Subquery(latest_placed))
        .values_list(*ROW_FIELDS, "placed_data")
    )
    read = list(found)
    rows = tuple(PlacementRow(*values[:-1]) for values in read)
    placed = placed_generation(read[0][-1]) if any(r.active for r in rows) else None
    return JobPlacements(rows, placed)


def jobs_placements(job_ids: Iterable[int]) -> dict[int, JobPlacements]:
    """:func:`job_placements` of each of ``job_ids`` that has placement rows (absent: never
    placed), in 2 queries for any number of jobs (a heartbeat's running jobs): the rows, and
    the data of the latest ``placed`` event of each job holding GPUs."""
    ids = list(job_ids)
    if not ids:
        return {}
    rows: dict[int, list[PlacementRow]] = defaultdict(list)
    found = Placement.objects.filter(AnyOf(F("job_id"), ids)).order_by("id")
    for job_id, *values in found.values_list("job_id", *ROW_FIELDS):
        rows[job_id].append(PlacementRow(*values))
    holding = [pk for pk, own in rows.items() if any(r.active for r in own)]
    last = (
        JobEvent.objects.filter(AnyOf(F("job_id"), holding), kind=JobEvent.Kind.PLACED)
        .order_by()
        .values("job_id")
        .annotate(last=Max("id"))
        .values_list("last", flat=True)
        if holding
        else []
    )
    # ``last`` goes in as a subquery: one statement for the events, not one for their ids and one
    # for their data
    placed = {
        pk: placed_generation(data)
        for pk, data in JobEvent.objects.filter(id__in=last).values_list("job_id", "data")
    }
    return {pk: JobPlacements(tuple(own), placed.get(pk)) for pk, own in rows.items()}


def placed_generation(data: object) -> int | None:
    """The ``generation`` of a ``placed`` event's ``data`` (``None``: none recorded)."""
    if isinstance(data, dict) and "generation" in data:
        return int(data["generation"])
    return None
