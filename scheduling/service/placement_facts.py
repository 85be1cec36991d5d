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
from functools import cache

from django.db import connection
from django.db.models import Field

from cluster import plain_rows
from cluster.compiled import meta
from cluster.models import GPU, JobEvent, Node, Placement


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


@cache
def _parts(vendor: str) -> tuple[str, str, tuple[Field | None, ...]]:
    """``(columns, tables, fields)`` of a read of placement rows: the select list of
    :class:`PlacementRow`'s fields in order (the rows as ``P``), the joined tables, and the
    fields of those columns."""
    q = connection.ops.quote_name
    p, g, n = (meta(m) for m in (Placement, GPU, Node))
    pcol = {f.name: q(f.column) for f in p.concrete_fields}
    node = q(g.get_field("node").column)
    columns = (
        f"G.{node}, N.{q(n.get_field('name').column)}, P.{pcol['active']}, P.{pcol['generation']}, "
        f"P.{pcol['gpu']}, P.{pcol['sub_batch']}, P.{pcol['shared_with']}, P.{pcol['predicted_slowdown']}"
    )
    tables = (
        f"{q(p.db_table)} P INNER JOIN {q(g.db_table)} G ON P.{pcol['gpu']} = G.{q(g.pk.column)} "
        f"INNER JOIN {q(n.db_table)} N ON G.{node} = N.{q(n.pk.column)}"
    )
    fields = (
        g.get_field("node"),
        n.get_field("name"),
        *(p.get_field(name) for name in ("active", "generation", "gpu", "sub_batch", "shared_with")),
        p.get_field("predicted_slowdown"),
    )
    return columns, tables, fields


@cache
def _rows_sql(vendor: str) -> tuple[str, tuple[Field | None, ...]]:
    """The statement of :func:`job_placements` (parameters: the job's id, the ``placed`` kind,
    the job's id) and the fields of its columns (those of :func:`_parts`, then the event's ``data``)."""
    q = connection.ops.quote_name
    p, e = meta(Placement), meta(JobEvent)
    columns, tables, fields = _parts(vendor)
    # the latest ``placed`` event's data rides on every row (a subquery the database runs once:
    # it depends on nothing of the row), so the rows and the floor take one statement, not two
    latest_placed = (
        f"SELECT {q(e.get_field('data').column)} FROM {q(e.db_table)} "
        f"WHERE {q(e.get_field('job').column)} = %s AND {q(e.get_field('kind').column)} = %s "
        f"ORDER BY {q(e.pk.column)} DESC LIMIT 1"
    )
    sql = (
        f"SELECT {columns}, ({latest_placed}) FROM {tables} "
        f"WHERE P.{q(p.get_field('job').column)} = %s ORDER BY P.{q(p.pk.column)}"
    )
    return sql, (*fields, e.get_field("data"))


def job_placements(job_id: int) -> JobPlacements:
    """The placement rows of job ``job_id`` (:class:`JobPlacements`) and its latest ``placed``
    event's generation, in one plain statement (:mod:`cluster.plain_rows`: an event's reads
    cost the ORM more to compile than the database to run). Read it after locking the job's row."""
    sql, fields = _rows_sql(connection.vendor)
    read = plain_rows.select(sql, [job_id, JobEvent.Kind.PLACED.value, job_id], fields)
    rows = tuple(PlacementRow(*values[:-1]) for values in read)
    placed = placed_generation(read[0][-1]) if any(r.active for r in rows) else None
    return JobPlacements(rows, placed)


def _many_rows_sql(vendor: str, count: int) -> str:
    """The rows of ``count`` jobs, each row's job first (parameters: the ids)."""
    q = connection.ops.quote_name
    p = meta(Placement)
    columns, tables, _ = _parts(vendor)
    job = q(p.get_field("job").column)
    return (
        f"SELECT P.{job}, {columns} FROM {tables} WHERE P.{job} IN ({plain_rows.marks(count)}) "
        f"ORDER BY P.{q(p.pk.column)}"
    )


def _latest_placed_sql(vendor: str, count: int) -> str:
    """Each of ``count`` jobs' latest ``placed`` event: its job and data (parameters: the ids,
    the kind)."""
    q = connection.ops.quote_name
    e = meta(JobEvent)
    ejob, ekind, eid, edata = (q(e.get_field(n).column) for n in ("job", "kind", "id", "data"))
    table = q(e.db_table)
    # the latest ids go in as a subquery: one statement for the events, not one for their ids and
    # one for their data
    return (
        f"SELECT {ejob}, {edata} FROM {table} WHERE {eid} IN (SELECT MAX({eid}) FROM {table} "
        f"WHERE {ejob} IN ({plain_rows.marks(count)}) AND {ekind} = %s GROUP BY {ejob})"
    )


def jobs_placements(job_ids: Iterable[int]) -> dict[int, JobPlacements]:
    """:func:`job_placements` of each of ``job_ids`` that has placement rows (absent: never
    placed), in 2 plain statements for any number of jobs (a heartbeat's running jobs): the
    rows, and the data of the latest ``placed`` event of each job holding GPUs."""
    ids = list(dict.fromkeys(int(j) for j in job_ids))
    if not ids:
        return {}
    _, _, fields = _parts(connection.vendor)
    rows: dict[int, list[PlacementRow]] = defaultdict(list)
    for job_id, *values in plain_rows.select(
        _many_rows_sql(connection.vendor, len(ids)), ids, (None, *fields)
    ):
        rows[job_id].append(PlacementRow(*values))
    holding = [pk for pk, own in rows.items() if any(r.active for r in own)]
    placed: dict[int, int | None] = {}
    if holding:
        events_sql = _latest_placed_sql(connection.vendor, len(holding))
        data_field = meta(JobEvent).get_field("data")
        found = plain_rows.select(events_sql, [*holding, JobEvent.Kind.PLACED.value], (None, data_field))
        placed = {pk: placed_generation(data) for pk, data in found}
    return {pk: JobPlacements(tuple(own), placed.get(pk)) for pk, own in rows.items()}


def placed_generation(data: object) -> int | None:
    """The ``generation`` of a ``placed`` event's ``data`` (``None``: none recorded)."""
    if isinstance(data, dict) and "generation" in data:
        return int(data["generation"])
    return None
