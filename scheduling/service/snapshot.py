"""The snapshot of a round: the cluster as the database holds it, as the core's frozen types.

:func:`load_state` reads GPUs, running placements, pending jobs and quotas as a
:class:`~scheduling.core.types.Snapshot`. Core GPU ids are dense (0 … N−1, ordered by node name
then index); :class:`ClusterState` maps them back to ``GPU`` primary keys. This and
:mod:`scheduling.service.persist` are the only places that map ORM rows (``cluster.models``) to the
core's types (``scheduling.core.types``) and back.

Units: seconds (s), MB, GPUs, iterations. Times given to the core are POSIX timestamps (s).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import BooleanField, ExpressionWrapper, F, Max, Q
from django.utils import timezone

from cluster.expressions import AnyOf, EpochSeconds
from cluster.models import GPU, Job, JobEvent, Node, Placement, Sharing
from cluster.runnable import HELD_WITHOUT_COMMAND, held_without_command
from scheduling.core import types as core
from scheduling.service.estimates import estimate_iter_time_s
from scheduling.service.fairness import scheduler_config, tenant_quotas
from scheduling.service.gpu_types import accepted_types, type_quotas
from scheduling.service.knowledge import (
    class_key,
    class_records,
    iteration_estimate,
    job_stats,
    learned_profile,
    memory_estimate,
    table_of,
)
from scheduling.service.silence import Hearing, fleet_hearing, heartbeat_timeout_s, is_silent

#: A kept core job: ``(inputs, fields, job)``, ``inputs`` being what a pending job's fields are
#: worked out from (its row, its class's record, its own samples, its requeue time; ``None`` for a
#: running job, whose service grows with the clock), ``fields`` the core job's fields.
KeptJob = tuple[tuple[Any, ...] | None, tuple[Any, ...], core.Job]
#: The latest snapshot's shipped table (the estimates' source) and its core jobs by pk, published
#: as one item so that a thread never pairs one snapshot's jobs with another's table.
_last: list[tuple[core.Profile, dict[int, KeptJob]]] = []


def forget_kept_jobs() -> None:
    """Drop the core jobs kept from the last snapshot: the next one works every job out from
    its row (what a process's first snapshot does; tests compare the two)."""
    _last.clear()


@dataclass(slots=True)
class ClusterState:
    """A snapshot plus the maps back to database rows.

    ``gpu_pks[i]`` / ``gpu_labels[i]`` (``"node-00:3"``): core GPU id ``i``; ``gpu_ids``: the
    inverse (pk → core id). ``residents[i]``: ``[(job pk, slot, sub-batch)]`` of the active
    placements on GPU ``i``. ``jobs``: every pending or running core ``Job`` by pk. ``held``:
    the pending jobs left out of the snapshot, pk → why they wait (jobs without a command while
    every node taking jobs runs processes, :func:`cluster.runnable.held_without_command`).
    """

    snapshot: core.Snapshot
    gpu_pks: tuple[int, ...]
    gpu_labels: tuple[str, ...]
    gpu_ids: dict[int, int]
    residents: dict[int, list[tuple[int, int, int]]]
    jobs: dict[int, core.Job]
    held: dict[int, str] = field(default_factory=dict)

    def node_and_index(self, gpu_id: int) -> tuple[str, int]:
        """``("node-00", 3)`` for core GPU id ``gpu_id``."""
        gpu = self.snapshot.cluster.gpus[gpu_id]
        return gpu.node, gpu.index

    def occupancy(self) -> tuple[dict[int, dict[int, tuple[int, int]]], dict[int, list[int]]]:
        """``(occupied, job_gpus)``, fresh copies a round may change: ``occupied[i]`` is
        ``{slot: (job pk, sub-batch)}`` of the active placements on core GPU ``i``; ``job_gpus[pk]``
        the core GPU ids job ``pk`` holds."""
        occupied = {g: {slot: (job, sub) for job, slot, sub in rows} for g, rows in self.residents.items()}
        job_gpus: dict[int, list[int]] = defaultdict(list)
        for g, slots in occupied.items():
            for job, _ in slots.values():
                job_gpus[job].append(g)
        return occupied, job_gpus


@contextmanager
def consistent_view() -> Iterator[None]:
    """A read-only transaction in which every query sees the database as of one moment
    (TESTING.md invariant 12), for reading a snapshot with :func:`load_state`.

    On PostgreSQL: ``REPEATABLE READ READ ONLY``, so the placements, jobs, events and quotas read
    by separate statements agree (under READ COMMITTED a job that finished between two of them
    was a GPU resident without a job, and the round crashed). On SQLite a transaction's reads are
    already one view. Inside an outer transaction (a test's, or a caller's) the isolation cannot
    change any more: the reads then share the outer transaction, whatever its level. Writes belong
    in a separate, later transaction (READ COMMITTED: a REPEATABLE READ writer would fail on
    every row an agent updated meanwhile), which re-checks what it changes.
    """
    outer = connection.in_atomic_block
    with transaction.atomic():
        if not outer and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def node_takes_jobs(
    status: str,
    last_heartbeat: datetime | None,
    now: datetime,
    timeout_s: float,
    registered_at: datetime,
    hearing: Hearing,
) -> bool:
    """Whether a node takes new jobs: ``ready``, and not silent past ``timeout_s`` seconds, its
    silence judged against ``hearing``, the newest heartbeat read from any node and the fleet's
    report latency (:func:`~scheduling.service.silence.is_silent`: a service that fell behind
    blames no node).
    A node never heard from is given the same deadline from its registration
    (``registered_at``, ``Node.created_at``): its agent must send a first heartbeat within one
    timeout, or the node takes nothing (an agent that never starts must not be handed jobs)."""
    if status != Node.Status.READY:
        return False
    return not is_silent(last_heartbeat, registered_at, hearing, now, timeout_s)


def requeue_times(job_ids: list[int]) -> dict[int, float]:
    """Job pk → the time of its latest ``preempted`` or ``requeued`` event (POSIX s), for the
    jobs of ``job_ids`` that have one (1 query; none for no ids). The snapshot passes its pending
    jobs that ran before (``started_at`` set): only they can have re-entered the queue.

    By the ids (``AnyOf``, the events' ``job_id`` index), not joined to the jobs on their
    status: PostgreSQL without statistics started that join from the ``job_status`` index, whose
    entries for every row version once pending stay until VACUUM, so the read grew with the jobs
    that had ended (docs/PERFORMANCE.md §10, "The round's two reads through the status index")."""
    if not job_ids:
        return {}
    return dict(
        JobEvent.objects.filter(
            AnyOf(F("job_id"), job_ids), kind__in=(JobEvent.Kind.PREEMPTED, JobEvent.Kind.REQUEUED)
        )
        .order_by()
        .values("job_id")
        .annotate(t=EpochSeconds(Max("at")))
        .values_list("job_id", "t")
    )


def load_state(now: datetime | None = None, profile: core.Profile | None = None) -> ClusterState:
    """Read the cluster from the database as a :class:`ClusterState` (at most 9 queries); call it inside
    :func:`consistent_view` so that they see one moment.

    - GPUs: every registered GPU, ordered by node name and index; ``healthy`` is False for an
      unhealthy GPU and for every GPU of a node that is not ``ready`` (unhealthy, draining) or
      whose last heartbeat (never heard from: its registration) is older than
      ``SHAREWISE_HEARTBEAT_TIMEOUT_S`` (unreachable, :func:`node_takes_jobs`).
    - Pending jobs (status ``pending``) and running jobs (status ``running`` with active
      placements; their ``Placement`` carries the GPUs, the sub-batch and the first placement's
      creation time). ``iter_time_s`` follows the order of trust
      (:func:`~scheduling.service.knowledge.iteration_estimate`: measured alone for this job >
      learned for its class > the submitted ``iteration_time_s`` > :func:`estimate_iter_time_s`
      from the shipped table under ``profile``, default the
      :func:`~scheduling.service.knowledge.learned_profile`); ``memory_mb``:
      :func:`~scheduling.service.knowledge.memory_estimate` (``None``: the profile's guess);
      ``sharing_allowed`` is False for a job of ``sharing: never``;
      ``attained_gpu_s`` (GPU-s) of a pending job is its stored ``Job.attained_gpu_s`` (the service
      of its earlier runs, :func:`attained_after_run`); of a running job, that plus
      ``gpus × (now − created_at of its current run's first active placement)``, so service
      before a preemption or requeue counts (as in the simulator). ``queued_since`` of a pending
      job that ran before is the time of its latest ``preempted`` or ``requeued`` event (its wait
      starts again, docs/FAIRNESS.md §2). Left out while every node that takes jobs runs
      processes: the pending jobs without a command (``held``; one more query then).
    - ``tenant_quotas``: :func:`tenant_quotas`; ``config``: :func:`scheduler_config`;
      ``type_quotas`` and each job's ``gpu_types``: :mod:`scheduling.service.gpu_types`.
    """
    now = now or timezone.now()
    table = table_of(profile or learned_profile())
    timeout_s = heartbeat_timeout_s()
    hearing = fleet_hearing()
    # Nodes apart from their GPUs: 128 rows instead of a node's two timestamps parsed per GPU.
    nodes = Node.objects.order_by().values_list("pk", "status", "last_heartbeat", "created_at", "executor")
    takes_jobs: dict[int, bool] = {}
    executors: set[str] = set()  # of the nodes that take jobs
    for pk, status, heartbeat, registered, executor in nodes:
        takes_jobs[pk] = node_takes_jobs(status, heartbeat, now, timeout_s, registered, hearing)
        if takes_jobs[pk]:
            executors.add(executor)
    gpu_rows = GPU.objects.order_by("node__name", "index").values_list(
        "pk", "index", "memory_mb", "gpu_type", "healthy", "node__name", "node_id"
    )
    gpus: list[core.GPU] = []
    gpu_pks: list[int] = []
    labels: list[str] = []
    for i, (pk, index, memory, gpu_type, healthy, node, node_pk) in enumerate(gpu_rows):
        ok = healthy and takes_jobs[node_pk]
        gpus.append(gpu := core.GPU(i, node, index, memory, gpu_type, ok))
        gpu_pks.append(pk)
        labels.append(gpu.label)
    gpu_ids = {pk: i for i, pk in enumerate(gpu_pks)}

    residents: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    placed: dict[int, tuple[list[int], int, datetime]] = {}
    for job_pk, gpu_pk, sub_batch, slot, created in Placement.objects.filter(active=True).values_list(
        "job_id", "gpu_id", "sub_batch", "slot", "created_at"
    ):
        gpu_id = gpu_ids[gpu_pk]
        residents[gpu_id].append((job_pk, slot, sub_batch))
        ids, _, first = placed.setdefault(job_pk, ([], sub_batch, created))
        ids.append(gpu_id)
        if created < first:
            placed[job_pk] = (ids, sub_batch, created)

    shapes: dict[tuple[str, int, int], tuple[float, Any]] = {}
    iter_times: dict[tuple[tuple[str, int, int], float | None], float] = {}
    type_lists: dict[str, tuple[str, ...]] = {}
    last_table, last_jobs = _last[0] if _last else (None, {})  # never changed once published
    same_table = last_table is table
    seen: dict[int, KeptJob] = {}
    # plain strings, looked up once (an enum member's lookup costs more than the comparison)
    pending_status, running_status, never_shares = (
        str(Job.Status.PENDING.value),
        str(Job.Status.RUNNING.value),
        str(Sharing.NEVER.value),
    )
    now_s = now.timestamp()
    pending: list[core.Job] = []
    running: list[core.RunningJob] = []
    jobs: dict[int, core.Job] = {}
    query = (
        Job.objects.filter(status__in=Job.ACTIVE_STATUSES)
        .annotate(
            submit_s=EpochSeconds(F("submitted_at")),
            ran=ExpressionWrapper(Q(started_at__isnull=False), output_field=BooleanField()),
        )
        .values_list(
            "pk",
            "tenant__name",
            "model",
            "batch_size",
            "gpus",
            "iterations",
            "iterations_done",
            "iteration_time_s",
            "gpu_memory_mb",
            "submit_s",
            "attained_gpu_s",
            "priority",
            "status",
            "sharing",
            "measured_memory_mb",
            "gpu_types",
            "ran",
        )
        .order_by()
    )
    # Every column is a plain number or string, so the ORM's per-row converters (a third of the
    # snapshot's time at 10,000 jobs) are skipped: the compiled query runs on a bare cursor.
    with connection.cursor() as cursor:
        cursor.execute(*query.query.sql_with_params())
        rows = cursor.fetchall()
    # Both reads by the ids of the rows just read, not joined on the status (requeue_times).
    requeued_at = requeue_times([r[0] for r in rows if r[12] == pending_status and r[16]])
    own = job_stats([r[0] for r in rows])
    records = class_records()
    for row in rows:
        (
            pk,
            tenant,
            model,
            batch,
            n_gpus,
            iterations,
            done,
            iter_s,
            memory,
            submitted,
            stored,
            priority,
            status,
            sharing,
            measured_memory,
            types,
            _,  # ran: read above
        ) = row
        # Per class (model, batch, GPUs), per submitted iteration time and per GPU-type list the
        # answers repeat (a few dozen distinct ones among 10,000 jobs): worked out once each.
        key = (model, batch, n_gpus)
        known = shapes.get(key)
        if known is None:
            profile_s = estimate_iter_time_s(table, model, batch, n_gpus)
            known = shapes[key] = (profile_s, records.get(class_key(model, batch, n_gpus)))
        profile_s, record = known
        mine = own.get(pk)
        inputs = None
        if status == pending_status:
            # A pending job's fields are a pure function of these (and of the table): when none
            # changed since the last snapshot (most jobs of a queue), its core job is reused
            # without working them out again.
            inputs = (row, record, mine, requeued_at.get(pk))
            kept = last_jobs.get(pk)
            if same_table and kept is not None and kept[0] == inputs:
                seen[pk] = kept
                jobs[pk] = kept[2]
                pending.append(kept[2])
                continue
        if mine is None:
            chosen = iter_times.get((key, iter_s))
            if chosen is None:
                chosen = iter_times[key, iter_s] = iteration_estimate(None, record, iter_s, profile_s).value
            iter_s = chosen
        else:
            iter_s = iteration_estimate(mine, record, iter_s, profile_s).value
        memory = memory_estimate(measured_memory, None if memory is None else float(memory), record)
        accepted = type_lists.get(types) if isinstance(types, str) else None
        if accepted is None:
            accepted = accepted_types(types)
            if isinstance(types, str):
                type_lists[types] = accepted
        attained = float(stored)
        run = placed.get(pk) if status == running_status else None
        if run is not None:  # plus the current run, from its first active placement
            attained += n_gpus * max(0.0, now_s - run[2].timestamp())
        queued = requeued_at.get(pk) if status == pending_status else None
        fields = (
            pk,
            tenant,
            model,
            batch,
            n_gpus,
            iterations,
            submitted,
            iter_s,
            memory,
            float(done),
            attained,
            queued,
            priority,
            sharing != never_shares,
            accepted,
        )
        # A job whose fields did not change since the last snapshot (most pending jobs) is the
        # same frozen object again: comparing a tuple costs less than building a dataclass.
        kept = last_jobs.get(pk)
        if kept is not None and kept[1] == fields:
            job = kept[2]
        else:
            job = core.Job(*fields)
        seen[pk] = (inputs, fields, job)
        jobs[pk] = job
        if status == pending_status:
            pending.append(job)
        elif pk in placed:
            ids, sub_batch, first = placed[pk]
            running.append(
                core.RunningJob(job, core.Placement(pk, tuple(sorted(ids)), sub_batch, first.timestamp()))
            )
    _last[:] = [(table, seen)]  # only the jobs of this snapshot are worth keeping
    held: dict[int, str] = {}
    if held_without_command(executors):  # one more query, only then
        without = Job.objects.filter(status=Job.Status.PENDING, command="").values_list("pk", flat=True)
        held = dict.fromkeys(without, HELD_WITHOUT_COMMAND)
        pending = [job for job in pending if job.id not in held]
    snapshot = core.Snapshot(
        now_s,
        core.Cluster(tuple(gpus)),
        tuple(pending),
        tuple(running),
        scheduler_config(),
        tenant_quotas(),
        type_quotas(),
    )
    return ClusterState(snapshot, tuple(gpu_pks), tuple(labels), gpu_ids, dict(residents), jobs, held)


def build_snapshot(now: datetime | None = None) -> core.Snapshot:
    """The :class:`~scheduling.core.types.Snapshot` a policy sees at ``now`` (see :func:`load_state`)."""
    return load_state(now).snapshot
