"""A job leaving its GPUs outside a round: finished, failed, requeued or cancelled.

- :func:`release` ends the job's placements and sets its status (the node-agent events and the
  heartbeat check call it); :func:`requeue` puts running jobs back to pending, progress kept.
- :func:`stop_job` sends the ``stop`` for a job whose placement ended outside a round.
- :func:`cancel_job`: a tenant's cancel, told to the agents.
- A job leaving its GPUs changes the co-location of the jobs that shared them:
  :func:`refresh_partners` sends those an ``update`` with their new slowdown ξ (MODEL.md §2),
  under the round lease so it never interleaves with a round; a round is requested for the
  freed GPUs (:func:`after_release`).

Units: seconds (s), iterations, GPU-seconds (GPU-s).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection, transaction

from cluster import plain_rows
from cluster.compiled import meta
from cluster.models import Job, JobEvent, Placement
from scheduling.service.dispatch import Message, dispatch_after_commit, stop_messages
from scheduling.service.estimates import attained_after_run
from scheduling.service.generations import latest_generation
from scheduling.service.knowledge import learned_profile
from scheduling.service.lease import RoundLease
from scheduling.service.persist import partner_updates
from scheduling.service.snapshot import consistent_view, load_state
from scheduling.service.trigger import request_round

log = logging.getLogger(__name__)

#: Longest wait for the round lease before a partner update is given up (s) **(ours)**.
PARTNER_LEASE_WAIT_S = 10.0
#: Seconds between two tries for the lease while a partner update waits **(ours)**.
PARTNER_LEASE_POLL_S = 0.02
#: Statuses a job never leaves.
TERMINAL = (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED)


def job_nodes(job_id: int) -> set[str]:
    """Names of the nodes holding the job's active placements."""
    return set(Placement.objects.filter(job_id=job_id, active=True).values_list("gpu__node__name", flat=True))


def advance_progress(job: Job, iterations_done: float) -> None:
    """Raise ``job.iterations_done`` to ``iterations_done`` (never lower it, never past the job's
    total); the caller saves the row."""
    job.iterations_done = min(float(job.iterations), max(job.iterations_done, float(iterations_done)))


@cache
def _partners_sql(vendor: str) -> str:
    """Other jobs' active rows on the GPUs a job holds (parameters: the job's id twice)."""
    q = connection.ops.quote_name
    p = meta(Placement)
    job, gpu, active = (q(p.get_field(n).column) for n in ("job", "gpu", "active"))
    table = q(p.db_table)
    # one statement: the job's GPUs as a subquery (a release per finished job, PERFORMANCE.md §10)
    return (
        f"SELECT {job} FROM {table} WHERE {active} AND {gpu} IN "
        f"(SELECT {gpu} FROM {table} WHERE {active} AND {job} = %s) AND {job} <> %s"
    )


def sharing_partners(job: Job) -> set[int]:
    """Ids of the other jobs active on the GPUs ``job`` holds now."""
    return {row[0] for row in plain_rows.select(_partners_sql(connection.vendor), [job.pk, job.pk], (None,))}


@cache
def _end_rows_sql(vendor: str) -> str:
    """End a job's active rows at a moment, never before a row's own start (the rule of
    ``cluster.expressions.run_end``; parameters: the moment, the job's id)."""
    q = connection.ops.quote_name
    p = meta(Placement)
    job, active, created, ended = (
        q(p.get_field(n).column) for n in ("job", "active", "created_at", "ended_at")
    )
    latest = "MAX" if vendor == "sqlite" else "GREATEST"  # SQLite's two-argument MAX
    return (
        f"UPDATE {q(p.db_table)} SET {active} = %s, {ended} = {latest}({created}, %s) "
        f"WHERE {active} AND {job} = %s"
    )


def end_rows(job: Job, now: datetime) -> None:
    """End ``job``'s active placement rows at ``now`` (``ended_at``: never before the row's
    ``created_at``, :func:`cluster.expressions.run_end`), in one plain statement."""
    moment = connection.ops.adapt_datetimefield_value(now)
    plain_rows.run(_end_rows_sql(connection.vendor), [False, moment, job.pk])


def release(
    job: Job, now: datetime, status: str, kind: str, message: str, data: dict[str, Any] | None = None
) -> set[int]:
    """End the job's active placements and set its ``status`` (``succeeded``/``failed``: finished
    now; ``pending``: back to the queue with its progress and, in the same transaction, the
    run's service ``gpus × (now − start of this run)`` added to ``attained_gpu_s``
    (:func:`~scheduling.service.estimates.attained_after_run`)), appending a ``kind`` event.

    Must run inside a transaction. Returns the ids of the jobs that shared its GPUs (their ξ
    changes). For a failed or requeued job, the agents of its nodes get a ``stop`` after commit
    (:func:`stop_job`; harmless where it no longer runs).
    """
    partners = sharing_partners(job)
    if status == Job.Status.PENDING:  # the run's service, read from its placements before they end
        Job.objects.filter(pk=job.pk).update(attained_gpu_s=attained_after_run(now))
        job.refresh_from_db(fields=["attained_gpu_s"])
    end_rows(job, now)
    job.status = status
    fields = ["status", "iterations_done", "measured_iteration_time_s"]
    if status in TERMINAL:
        job.finished_at = now
        fields.append("finished_at")
    if status == Job.Status.FAILED:
        job.failure_reason = message
        fields.append("failure_reason")
    plain_rows.update(job, fields)
    data = {**(data or {}), "iterations_done": job.iterations_done}
    plain_rows.insert(JobEvent(job=job, kind=kind, at=now, message=message, data=data))
    if status != Job.Status.SUCCEEDED:
        stop_job(job.pk)
    return partners


def after_release(partners: Iterable[int]) -> None:
    """After commit: the ``partners`` (jobs that shared the released GPUs) get their new ξ
    (:func:`refresh_partners`), and a round is requested for the freed GPUs (debounced, broker
    only)."""
    ids = sorted(partners)
    if ids:
        transaction.on_commit(lambda: refresh_partners(ids), robust=True)
    request_round()


def stop_job(job_id: int) -> list[Message]:
    """Tell the agents to stop a job whose placement ended outside a round (e.g. a cancel).

    One ``stop`` (AGENT.md §1) per node of the job's latest placement (its rows of the highest
    generation, active or not), with a new generation that is also written on those rows; sent
    by the dispatcher after the current transaction commits. Returns the messages (``[]`` for a
    job that never held a GPU). A ``stop`` for a job an agent does not run changes nothing there.
    """
    with transaction.atomic():
        latest = latest_generation(job_id)
        if latest is None:
            return []
        rows = Placement.objects.filter(job_id=job_id, generation=latest)
        nodes = sorted(set(rows.values_list("gpu__node__name", flat=True)))
        rows.update(generation=latest + 1)
        messages = stop_messages(nodes, job_id, latest + 1)
        dispatch_after_commit(messages)
    return messages


def refresh_partners(job_ids: Sequence[int]) -> int:
    """Send each still-running job of ``job_ids`` an ``update`` with its current slowdown ξ
    (its GPU partner left; AGENT.md §1, MODEL.md §2), with a new generation written on its rows.

    Takes the round lease (waiting up to :data:`PARTNER_LEASE_WAIT_S`) so that no round
    interleaves; must be called outside a transaction on PostgreSQL (the lease's rule). Returns
    the number of messages sent (0 when the lease stayed busy: logged; the job then keeps its old
    pace until its next placement change).
    """
    lease = RoundLease()
    if not lease.acquire_within(PARTNER_LEASE_WAIT_S, PARTNER_LEASE_POLL_S):
        log.warning("partner update of jobs %s skipped: the round lease stayed busy", list(job_ids))
        return 0
    try:
        with consistent_view():
            profile = learned_profile()
            state = load_state(profile=profile)
        with transaction.atomic():
            occupied, job_gpus = state.occupancy()
            ids = [j for j in job_ids if j in job_gpus and j in state.jobs]
            messages = partner_updates(state, profile, occupied, job_gpus, ids)
            dispatch_after_commit(messages)
    finally:
        lease.release()
    return len(messages)


def cancel_job(job: Job, by: str = "") -> bool:
    """Cancel ``job`` (:meth:`Job.cancel`) and, if this call cancelled it, tell its nodes: a
    ``stop`` to each (:func:`stop_job`), an ``update`` to the jobs that shared its GPUs, a round
    for the freed GPUs. Returns whether this call cancelled it."""
    partners = sharing_partners(job)
    if not job.cancel(by=by):
        return False
    with transaction.atomic():
        stop_job(job.pk)
        after_release(partners)
    return True


def requeue(job_ids: Iterable[int], now: datetime, reason: str) -> list[int]:
    """Put running jobs back to pending with the progress last reported (their placements end, a
    ``requeued`` event, a ``stop`` to their nodes, an ``update`` to their partners). Returns the
    ids requeued (jobs no longer running are skipped)."""
    ids = list(job_ids)
    if not ids:  # a heartbeat's usual case: no savepoint round trips for nothing
        return []
    done: list[int] = []
    partners: set[int] = set()
    with transaction.atomic():
        # by ascending key, as every writer of several jobs locks them (docs/LOCKS.md): in
        # Job.Meta.ordering (newest first) this deadlocked with a round preempting the same jobs
        running = Job.objects.select_for_update().filter(pk__in=ids, status=Job.Status.RUNNING)
        for job in running.order_by("pk"):
            partners |= release(job, now, Job.Status.PENDING, JobEvent.Kind.REQUEUED, reason)
            done.append(job.pk)
        if done:
            after_release(partners - set(done))
    return done
