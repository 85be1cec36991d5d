"""What a round writes, in its transaction: preemptions, starts and partner updates as
``Placement`` rows (slot 0 or 1, so the database's "at most two active jobs per GPU" constraint
holds), the jobs' status and ``JobEvent`` rows, and the decision records of the
:class:`~scheduling.models.Round`; the messages to send after commit come back in a
:class:`RoundPlan`. Generations: :mod:`scheduling.service.generations`. A run begins at the round's
time, never before its job's submission (:func:`run_start`).

Units: seconds (s), GPUs, iterations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import F, Value
from django.db.models.functions import Coalesce

from cluster.expressions import AnyOf, run_end
from cluster.models import Job, JobEvent, Placement
from scheduling.core import types as core
from scheduling.service.bulk import insert_values, quoted_table
from scheduling.service.dispatch import Colocation, Message, Occupancy, colocation_of, placement_messages
from scheduling.service.estimates import attained_after_run
from scheduling.service.generations import next_generations
from scheduling.service.snapshot import ClusterState

#: The fields of a new ``Placement`` row, in the order :func:`persist_round` gives their values.
PLACEMENT_FIELDS = (
    "job",
    "gpu",
    "generation",
    "sub_batch",
    "slot",
    "active",
    "created_at",
    "shared_with",
    "predicted_slowdown",
)


@dataclass(slots=True)
class RoundPlan:
    """What one round wrote (filled by :func:`persist_round`): the ``Round.decisions`` entries
    (starts and preemptions), its waits as ``(job id, reason)`` in the order decided (stored
    packed, :func:`~scheduling.round_waits.pack_waits`), the messages to dispatch after commit,
    and the counts of the ``Round`` record."""

    decisions: list[dict[str, Any]] = field(default_factory=list)
    waits: list[tuple[int, str]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    n_started: int = 0
    n_waiting: int = 0
    n_preempted: int = 0


def run_start(now: datetime, submitted_at: datetime) -> datetime:
    """When a run that a round at ``now`` starts begins (its placements' ``created_at``, its
    ``placed`` event, the job's first ``started_at``): the round's time, but never before the
    job's ``submitted_at``. The round's clock is read before its snapshot, so a job committed
    while the snapshot was being read (or submitted by a web process whose clock runs a little
    ahead) would otherwise start before it was submitted, with a negative queueing delay
    (start − submit, the dashboard's and the metrics' definition, must be ≥ 0)."""
    return max(now, submitted_at)


def persist_round(
    state: ClusterState, decisions: core.RoundDecisions, profile: core.Profile, now: datetime
) -> RoundPlan:
    """Write one round's preemptions, starts and partner updates; return the decisions and the
    messages to send after commit. Preemptions first (a start may use the GPUs they free).

    Only what changes is written: the started and preempted jobs, their placements and events,
    and the placements of running jobs whose partner changed; a job that keeps waiting is not
    touched (its reason goes to the ``Round`` record only), so a round that starts and preempts
    nothing writes no row here."""
    plan = RoundPlan()
    occupied, job_gpus = state.occupancy()
    starting = [s.job_id for s in decisions.starts]
    touched = [p.job_id for p in decisions.preemptions] + starting
    generation = next_generations(touched)
    changed_partners: set[int] = set()

    # -- the rows of every job written here, locked first: see lock_round_jobs
    locked = lock_round_jobs(decisions, occupied, job_gpus)

    # -- preemptions: the job goes back to the queue; its partners get an update
    preempted = {
        p.job_id for p in decisions.preemptions if locked.get(p.job_id, ("",))[0] == Job.Status.RUNNING
    }
    if preempted:  # back to the queue, the run's service added (before its placements end)
        Job.objects.filter(pk__in=preempted, status=Job.Status.RUNNING).update(
            status=Job.Status.PENDING, attained_gpu_s=attained_after_run(now)
        )
    events: list[tuple[int, str, datetime, str, dict[str, Any]]] = []
    for p in decisions.preemptions:
        if p.job_id not in preempted:
            plan.waits.append((p.job_id, f"not preempted: no longer running ({p.reason})"))
            continue
        gen = generation[p.job_id]
        gpu_ids = sorted(job_gpus.pop(p.job_id, []))
        for g in gpu_ids:
            slots = occupied[g]
            for slot, (job, _) in list(slots.items()):
                if job == p.job_id:
                    del slots[slot]
            changed_partners.update(job for job, _ in slots.values())
        Placement.objects.filter(job_id=p.job_id, active=True).update(
            active=False, ended_at=run_end(now), generation=gen
        )
        plan.messages.extend(placement_messages(state, profile, occupied, p.job_id, gpu_ids, gen, "stop"))
        events.append((p.job_id, JobEvent.Kind.PREEMPTED, now, p.reason, {"generation": gen}))
        plan.decisions.append(decision_entry(p.job_id, "preempt", p.reason, state, gpu_ids))
        plan.n_preempted += 1

    # -- starts: only jobs still pending (a cancel may have won the race; a job preempted above
    # is pending now); gangs all or nothing. Their commands (for the start messages) and
    # submission times (for their start's date) were read with their locks.
    commands: dict[int, str] = {}
    begins: dict[int, datetime] = {}  # started job → when its run begins (placements, event)
    for pk in starting:
        status, command, submitted = locked.get(pk, ("", "", now))
        if status == Job.Status.PENDING or pk in preempted:
            commands[pk] = command
            begins[pk] = run_start(now, submitted)
    # values of the new rows, in the order of PLACEMENT_FIELDS (the co-location filled in below)
    new_rows: list[list[Any]] = []
    rows_of: dict[int, dict[int, list[Any]]] = {}  # started job → core GPU id → its new row
    started: list[core.Start] = []
    for s in decisions.starts:
        reason = None if s.job_id in commands else "no longer pending when the round wrote placements"
        slots_for: list[int] = []
        if reason is None:
            for g in s.gpu_ids:
                free = [slot for slot in (0, 1) if slot not in occupied.get(g, {})]
                if not free:
                    reason = f"GPU {state.gpu_labels[g]} already holds two jobs"
                    break
                slots_for.append(free[0])
        if reason is not None:
            plan.waits.append((s.job_id, reason))
            plan.n_waiting += 1
            continue
        gen = generation[s.job_id]
        for g, slot in zip(s.gpu_ids, slots_for, strict=True):
            changed_partners.update(job for job, _ in occupied.get(g, {}).values())
            occupied.setdefault(g, {})[slot] = (s.job_id, s.sub_batch)
            row = [s.job_id, state.gpu_pks[g], gen, s.sub_batch, slot, True, begins[s.job_id], None, None]
            new_rows.append(row)
            rows_of.setdefault(s.job_id, {})[g] = row
        job_gpus[s.job_id] = list(s.gpu_ids)
        started.append(s)
    # the co-location each start message describes (a job started alone may have been given a
    # partner later in the round), written on its rows
    colocations = {s.job_id: colocation_of(state, profile, occupied, s.job_id, s.gpu_ids) for s in started}
    for job_pk, colo in colocations.items():
        for g, row in rows_of[job_pk].items():
            row[7], _, row[8] = colo.partners.get(g, (None, None, None))
    insert_values(Placement, PLACEMENT_FIELDS, new_rows)
    started_ids = [s.job_id for s in started]
    by_begin: dict[datetime, list[int]] = {}  # one UPDATE per start time: nearly always one
    for job_pk in started_ids:
        by_begin.setdefault(begins[job_pk], []).append(job_pk)
    for begin, pks in by_begin.items():
        Job.objects.filter(AnyOf(F("pk"), pks), status=Job.Status.PENDING).update(
            status=Job.Status.RUNNING, started_at=Coalesce(F("started_at"), Value(begin))
        )
    for s in started:
        decision = decision_entry(s.job_id, "start", s.reason, state, s.gpu_ids, s)
        plan.decisions.append(decision)
        data = {
            "generation": generation[s.job_id],
            "gpus": decision["gpus"],
            "sub_batch": s.sub_batch,
            "accum_steps": s.accum_steps,
        }
        events.append((s.job_id, JobEvent.Kind.PLACED, begins[s.job_id], s.reason, data))
        plan.messages.extend(
            placement_messages(
                state,
                profile,
                occupied,
                s.job_id,
                s.gpu_ids,
                generation[s.job_id],
                "start",
                commands[s.job_id],
                colocations[s.job_id],
            )
        )
        plan.n_started += 1

    # -- updates: running jobs whose GPU partner started or left get their new slowdown
    partners = sorted(changed_partners - set(started_ids) - preempted)
    plan.messages.extend(partner_updates(state, profile, occupied, job_gpus, partners))
    insert_values(JobEvent, ("job", "kind", "at", "message", "data"), events)

    plan.waits.extend((w.job_id, w.reason) for w in decisions.waits)
    plan.n_waiting += len(decisions.waits)
    plan.waits.extend(state.held.items())  # left out of the snapshot: they wait, saying why
    plan.n_waiting += len(state.held)
    return plan


def lock_round_jobs(
    decisions: core.RoundDecisions, occupied: Occupancy, job_gpus: dict[int, list[int]]
) -> dict[int, tuple[str, str, datetime]]:
    """Lock, in one ``SELECT … ORDER BY id FOR UPDATE``, the rows of the jobs the round may write:
    those it preempts or starts, and every job on the GPUs they leave or take (their placement
    rows get the partner update), as ``occupied`` and ``job_gpus`` place them before the round
    (:meth:`~scheduling.service.snapshot.ClusterState.occupancy`). Returns job pk → ``(status,
    command, submitted_at)`` as read under the lock (a job that no longer exists is missing).

    Why: every writer of several jobs locks them by ascending key before any of their placement
    rows (docs/LOCKS.md). The preemption UPDATE alone locked the jobs in its scan order and the
    partner update wrote placement rows of jobs it had not locked: each deadlocked with a requeue
    of the same jobs (tests/service/test_round_lock_order.py). No statement more than before: the
    preempted jobs' status and the started jobs' commands were read by two queries."""
    gpus = {g for p in decisions.preemptions for g in job_gpus.get(p.job_id, ())}
    gpus.update(g for s in decisions.starts for g in s.gpu_ids)
    ids = {p.job_id for p in decisions.preemptions} | {s.job_id for s in decisions.starts}
    ids.update(job for g in gpus for job, _ in occupied.get(g, {}).values())
    if not ids:
        return {}
    rows = (
        Job.objects.select_for_update()
        .filter(AnyOf(F("pk"), sorted(ids)))
        .order_by("pk")
        .values_list("pk", "status", "command", "submitted_at")
    )
    return {pk: (status, command, submitted) for pk, status, command, submitted in rows}


def partner_updates(
    state: ClusterState,
    profile: core.Profile,
    occupied: Occupancy,
    job_gpus: dict[int, list[int]],
    job_ids: Sequence[int],
) -> list[Message]:
    """An ``update`` for each running job of ``job_ids`` (each must hold GPUs in ``job_gpus``)
    with its slowdown ξ on ``occupied`` (its GPU partner started or left; AGENT.md §1, MODEL.md
    §2), under a new generation written on its active rows with the new co-location (partner and
    predicted ξ per GPU; the measured ξ of the old one is cleared). Returns the messages to send
    after commit."""
    if not job_ids:
        return []
    generations = next_generations(job_ids)
    # the jobs' rows locked (ascending key) before their placement rows are written (docs/LOCKS.md):
    # a round holds them already (lock_round_jobs); a partner update outside a round takes them here
    commands = dict(
        Job.objects.select_for_update()
        .filter(AnyOf(F("pk"), job_ids))
        .order_by("pk")
        .values_list("pk", "command")
    )
    messages: list[Message] = []
    colocations: dict[int, tuple[Colocation, int]] = {}
    for job_pk in job_ids:
        gen = generations[job_pk]
        colo = colocation_of(state, profile, occupied, job_pk, job_gpus[job_pk])
        colocations[job_pk] = (colo, gen)
        messages.extend(
            placement_messages(
                state,
                profile,
                occupied,
                job_pk,
                sorted(job_gpus[job_pk]),
                gen,
                "update",
                commands.get(job_pk, ""),
                colo,
            )
        )
    write_colocations(state, colocations)
    return messages


def write_colocations(state: ClusterState, colocations: Mapping[int, tuple[Colocation, int]]) -> int:
    """Write, on the active rows of each job of ``colocations`` (job pk → ``(co-location,
    generation)``), the generation and per GPU its partner and predicted ξ, the measured ξ
    cleared: one SELECT and one ``UPDATE … FROM (VALUES …)`` whatever the number of jobs (Django's
    ``bulk_update`` builds a CASE per row and field, and cost more than the rest of the round's
    writes). Returns the rows written."""
    if not colocations:
        return 0
    gpu_of = state.gpu_ids
    values: list[Any] = []
    for pk, job_pk, gpu_pk in Placement.objects.filter(
        AnyOf(F("job_id"), list(colocations)), active=True
    ).values_list("pk", "job_id", "gpu_id"):
        colo, gen = colocations[job_pk]
        partner, _, xi = colo.partners.get(gpu_of[gpu_pk], (None, None, None))
        values += (pk, gen, partner, xi)
    rows = len(values) // 4
    table = quoted_table(Placement)
    # The first row's casts type the VALUES list (a NULL alone would be text on PostgreSQL); its
    # columns are column1 … column4 on both PostgreSQL and SQLite. Chunks stay far below
    # SQLite's 32,766 parameters.
    first = "(CAST(%s AS BIGINT), CAST(%s AS INTEGER), CAST(%s AS BIGINT), CAST(%s AS DOUBLE PRECISION))"
    chunk = 4 * 2000
    with connection.cursor() as cursor:
        for at in range(0, len(values), chunk):
            part = values[at : at + chunk]
            rest = ", (%s, %s, %s, %s)" * (len(part) // 4 - 1)
            cursor.execute(
                f"UPDATE {table} SET generation = v.column2, shared_with = v.column3, "
                f"predicted_slowdown = v.column4, measured_slowdown = NULL "
                f"FROM (VALUES {first}{rest}) AS v WHERE {table}.id = v.column1",
                part,
            )
    return rows


def decision_entry(
    job_id: int,
    action: str,
    reason: str,
    state: ClusterState | None = None,
    gpu_ids: Sequence[int] = (),
    start: core.Start | None = None,
) -> dict[str, Any]:
    """One entry of ``Round.decisions`` (the shape documented on :class:`~scheduling.models.Round`)."""
    return {
        "job_id": job_id,
        "action": action,
        "gpu_ids": [state.gpu_pks[g] for g in gpu_ids] if state else [],
        "gpus": [state.gpu_labels[g] for g in gpu_ids] if state else [],
        "sub_batch": start.sub_batch if start else None,
        "accum_steps": start.accum_steps if start else None,
        "shares": [
            {
                "partner_id": sh.partner_id,
                "gpu_ids": [state.gpu_pks[g] for g in sh.gpu_ids],
                "xi_self": sh.xi_self,
                "xi_partner": sh.xi_partner,
                "t_seq_s": sh.t_seq_s,
                "t_con_s": sh.t_con_s,
            }
            for sh in start.shares
        ]
        if start and state
        else [],
        "reason": reason,
    }
