"""Job events reported by the node agents (docs/AGENT.md §2): ``started``, ``progress``,
``finished``, ``failed`` and ``stopped`` of one job from one node.

An event is accepted iff ``floor ≤ generation ≤ latest``
(:meth:`~scheduling.service.placement_facts.JobPlacements.window`), and applying it is idempotent under
at-least-once delivery. Errors: :class:`AgentError` carries the HTTP status.

Units: seconds (s), iterations.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Field
from django.utils import timezone

from agent.messages import EventKind
from cluster import plain_rows
from cluster.compiled import meta
from cluster.models import Job, JobEvent, Node
from scheduling.service.jobs import TERMINAL, advance_progress, after_release, release
from scheduling.service.observations import (
    SharedSample,
    fold_shared,
    mark_incompatible,
    observe_memory,
    observe_progress,
    oom_partners,
)
from scheduling.service.placement_facts import JobPlacements, job_placements

#: The columns an event's progress writes.
PROGRESS_FIELDS = ("iterations_done", "measured_iteration_time_s")


class AgentError(Exception):
    """A report the server refuses; ``status`` is the HTTP status (403, 404, 409)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """One job event as validated by the API (AGENT.md §2): ``iterations_done`` (iterations),
    ``iter_time_s`` (s, measured at the job's sub-batch, ``None`` before the first measurement),
    ``memory_mb`` (peak GPU memory per GPU at the sub-batch, MB, ``None``: not reported),
    ``failure_kind`` (``"oom"``: a ``failed`` job ran out of GPU memory)."""

    generation: int
    event: EventKind
    iterations_done: float
    iter_time_s: float | None = None
    reason: str = ""
    memory_mb: float | None = None
    failure_kind: str = ""


def _reported_by_node(job_id: int, floor: int, event: str | None = None) -> dict[str, float]:
    """Per node: the largest ``iterations_done`` the job's agent events of generation ≥ ``floor``
    reported (only events of kind ``event`` when given)."""
    best: dict[str, float] = {}
    for data in JobEvent.objects.filter(
        job_id=job_id, data__generation__gte=floor, data__has_key="node"
    ).values_list("data", flat=True):
        if event is not None and data.get("event") != event:
            continue
        node = data["node"]
        best[node] = max(best.get(node, 0.0), float(data.get("iterations_done") or 0.0))
    return best


def record_event(node: Node, job_id: int, event: AgentEvent, now: datetime | None = None) -> dict[str, Any]:
    """Apply one agent event for job ``job_id`` reported by ``node`` (AGENT.md §2).

    Returns ``{"job_id", "status", "accepted"}`` (``accepted`` False: a harmless repeat, 200).
    Raises :class:`AgentError`: 404 unknown job; 403 the job was never placed on ``node`` (a node
    reports only its own jobs); 409 ``stale generation`` outside ``[floor, latest]``.

    What an accepted event does (a gang spanning nodes counts per node): ``progress`` and
    ``started`` keep the largest ``iterations_done`` (a gang: the smallest over its nodes) and the
    measured iteration time; ``finished`` from the last node of the gang → ``succeeded``;
    ``failed`` → ``failed`` and a ``stop`` to the gang's other nodes; ``stopped`` while the job
    still holds this node's GPUs (the agent shut down) → back to ``pending`` with its progress.
    A job leaving its GPUs frees them for the next round, which is requested.

    Learning (:mod:`scheduling.service.observations`): the measured iteration time and memory of
    ``started``, ``progress`` and ``finished`` go into the learned profile. A ``failed`` event of
    kind ``oom`` marks the job and every partner it shared GPUs with incompatible at their
    sub-batches; a job that shared is requeued (``pending``, progress kept) up to
    ``SHAREWISE_OOM_RETRIES`` times, a job that was alone (or out of retries) fails.
    """
    now = now or timezone.now()
    partners: set[int] = set()
    with transaction.atomic():
        # plain statements for the event's one-row reads and writes (cluster.plain_rows: the ORM's
        # compilation of each cost several times the statement, PERFORMANCE.md §10)
        job = plain_rows.get(Job, job_id, lock=True)
        if job is None:
            raise AgentError(404, f"job {job_id} does not exist")
        loaded = progress_of(job)
        # every placement question below is answered from one read of the job's rows, taken
        # under its lock (docs/PERFORMANCE.md §10: about ten queries per event before)
        placements = job_placements(job_id)
        if not placements.placed_on(node.pk):
            raise AgentError(403, f"job {job_id} was never placed on node {node.name}")
        window = placements.window()
        assert window is not None  # the job has placement rows (checked above)
        floor, latest = window
        if _finished_after_requeue(job, node, event, latest, placements):
            # the run was requeued (its node fell silent: the web service was down, say) but ran
            # on to the end: its work is done, so the job succeeds rather than running again
            job.iterations_done = float(job.iterations)
            data = {"node": node.name, "generation": event.generation, "event": event.event}
            why = "finished after it was requeued"
            release(job, now, Job.Status.SUCCEEDED, JobEvent.Kind.SUCCEEDED, why, data)  # no placement left
            return _answer(job, accepted=True)
        if event.generation > latest or (
            event.generation < floor and not (job.status in TERMINAL and event.event != "progress")
        ):
            raise AgentError(409, "stale generation")
        data = {
            "node": node.name,
            "generation": event.generation,
            "event": event.event,
            "iterations_done": event.iterations_done,
            "iter_time_s": event.iter_time_s,
        }
        if job.status in TERMINAL:
            return _answer(job, accepted=False)
        if event.iter_time_s is not None:
            job.measured_iteration_time_s = event.iter_time_s
        nodes = placements.active_nodes()
        if job.status == Job.Status.PENDING or node.name not in nodes:
            # The job was preempted or requeued, and this is the agent's acknowledgment (or a
            # late report): a node of its latest placement may still tell how far it got (the
            # job resumes there); a node it has moved away from changes nothing.
            if job.status != Job.Status.PENDING or node.name not in placements.latest_nodes():
                return _answer(job, accepted=False)
            advance_progress(job, event.iterations_done)
            save_progress(job, loaded)
            return _answer(job, accepted=event.event == "stopped")
        accepted = True
        shared: list[SharedSample] = []  # folded last, so their rows are locked only to the commit
        if event.event in ("started", "progress", "finished"):
            if event.memory_mb is not None:
                observe_memory(job, event.memory_mb, placements)
            if event.iter_time_s is not None:
                data["learned"] = observe_progress(
                    job, event.generation, event.iter_time_s, now, placements, shared
                )
        if event.event in ("started", "progress"):
            accepted = _progress(job, node, nodes, event, floor, data, now)
            if accepted:  # a repeated start writes nothing (its iteration time neither)
                save_progress(job, loaded)
        elif event.event == "finished":
            accepted, partners = _finished(job, node, nodes, event, floor, data, now)
        elif event.event == "failed":
            if len(nodes) <= 1:
                advance_progress(job, event.iterations_done)
            partners = _failed(job, node, event, data, now)
        else:  # stopped by the agent itself: it shut down, or lost the GPUs
            if len(nodes) <= 1:
                advance_progress(job, event.iterations_done)
            partners = release(
                job,
                now,
                Job.Status.PENDING,
                JobEvent.Kind.REQUEUED,
                f"stopped on node {node.name}: {event.reason or 'no reason given'}",
                data,
            )
        if job.status != Job.Status.RUNNING:
            after_release(partners)
        fold_shared(shared)
    return _answer(job, accepted=accepted)


def progress_of(job: Job) -> tuple[float, float | None]:
    """The job's progress columns (:data:`PROGRESS_FIELDS`): iterations, iteration time (s)."""
    return job.iterations_done, job.measured_iteration_time_s


def save_progress(job: Job, loaded: tuple[float, float | None]) -> None:
    """Write the job's progress columns unless they still hold ``loaded``, what was read under the
    job's lock: a ``started`` at 0 iterations before any measurement, or a repeat, changes nothing,
    and its UPDATE was one statement of six (docs/PERFORMANCE.md §10)."""
    if progress_of(job) != loaded:
        plain_rows.update(job, PROGRESS_FIELDS)


def _failed(job: Job, node: Node, event: AgentEvent, data: dict[str, Any], now: datetime) -> set[int]:
    """A failed job leaves its GPUs: failed, or, out of memory beside other jobs with retries
    left, back to the queue (the pairs marked incompatible first, so the next round avoids them).
    Returns the jobs that shared its GPUs."""
    reason = event.reason or f"failed on node {node.name}"
    if event.failure_kind != "oom":
        return release(job, now, Job.Status.FAILED, JobEvent.Kind.FAILED, reason, data)
    beside = oom_partners(job, now)
    if not beside:
        return release(
            job, now, Job.Status.FAILED, JobEvent.Kind.FAILED, f"out of memory alone: {reason}", data
        )
    mark_incompatible(job, beside, reason, now)
    names = ", ".join(f"job {p[0]}" for p in beside)
    limit = int(settings.SHAREWISE_OOM_RETRIES)
    if job.oom_retries >= limit:
        message = f"out of memory beside {names}, after {limit} retries: {reason}"
        return release(job, now, Job.Status.FAILED, JobEvent.Kind.FAILED, message, data)
    Job.objects.filter(pk=job.pk).update(oom_retries=F("oom_retries") + 1)
    job.oom_retries += 1
    message = f"out of memory beside {names} (retry {job.oom_retries} of {limit}; that pair no longer shares)"
    return release(
        job, now, Job.Status.PENDING, JobEvent.Kind.REQUEUED, message, {**data, "failure_kind": "oom"}
    )


def _answer(job: Job, accepted: bool) -> dict[str, Any]:
    return {"job_id": job.pk, "status": job.status, "accepted": accepted}


def _progress(
    job: Job, node: Node, nodes: set[str], event: AgentEvent, floor: int, data: dict[str, Any], now: datetime
) -> bool:
    """``nodes``: the nodes holding the job (its active placements)."""
    if event.event == "started" and _started_before(job.pk, node.name, event.generation):
        return False  # a repeated started (a re-sent start re-confirms it): nothing new
    kind = JobEvent.Kind.STARTED if event.event == "started" else JobEvent.Kind.PROGRESS
    plain_rows.insert(JobEvent(job=job, kind=kind, at=now, data=data))
    if len(nodes) <= 1:
        advance_progress(job, event.iterations_done)
    else:  # a gang's progress is that of its slowest node (AGENT.md §1, "Gangs across nodes")
        reported = _reported_by_node(job.pk, floor)
        if nodes <= reported.keys():
            advance_progress(job, min(reported[n] for n in nodes))
    return True


@cache
def _started_sql(vendor: str) -> tuple[str, tuple[Field | None, ...]]:
    """The data of a job's ``started`` events (parameters: the job's id, the kind)."""
    q = connection.ops.quote_name
    e = meta(JobEvent)
    sql = (
        f"SELECT {q(e.get_field('data').column)} FROM {q(e.db_table)} "
        f"WHERE {q(e.get_field('job').column)} = %s AND {q(e.get_field('kind').column)} = %s"
    )
    return sql, (e.get_field("data"),)


def _started_before(job_id: int, node: str, generation: int) -> bool:
    """Whether the job already has a ``started`` event of ``node`` at ``generation`` (one per run
    and node: the job's few ``started`` rows are read and matched here, the same rule on every
    database, where a JSON-key lookup would be written per backend)."""
    sql, fields = _started_sql(connection.vendor)
    for (data,) in plain_rows.select(sql, [job_id, JobEvent.Kind.STARTED.value], fields):
        if isinstance(data, dict) and data.get("node") == node and data.get("generation") == generation:
            return True
    return False


def _finished_after_requeue(
    job: Job, node: Node, event: AgentEvent, latest: int, placements: JobPlacements
) -> bool:
    """Whether ``event`` is the completion of a run the service requeued while it went on: a
    ``finished`` with all the job's iterations done, of a generation below ``latest``, for a job
    now waiting (not placed again) whose latest placement was on ``node`` alone (a gang's other
    nodes could not be vouched for)."""
    return (
        event.event == "finished"
        and job.status == Job.Status.PENDING
        and event.generation < latest
        and event.iterations_done >= job.iterations
        and placements.latest_nodes() == {node.name}
    )


def _finished(
    job: Job, node: Node, nodes: set[str], event: AgentEvent, floor: int, data: dict[str, Any], now: datetime
) -> tuple[bool, set[int]]:
    """``nodes``: the nodes holding the job (its active placements)."""
    if len(nodes) > 1:
        done = set(_reported_by_node(job.pk, floor, "finished"))
        if node.name in done:
            return False, set()
        if not nodes <= done | {node.name}:  # other nodes of the gang are still running
            JobEvent.objects.create(
                job=job,
                kind=JobEvent.Kind.PROGRESS,
                at=now,
                data=data,
                message=f"finished on node {node.name}",
            )
            plain_rows.update(job, ["measured_iteration_time_s"])
            return True, set()
    job.iterations_done = float(job.iterations)
    return True, release(job, now, Job.Status.SUCCEEDED, JobEvent.Kind.SUCCEEDED, "", data)
