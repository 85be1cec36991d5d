"""Where the database meets the scheduling core: snapshot, round, persist, dispatch.

This is the only module that maps ORM rows (``cluster.models``) to the core's frozen types
(``scheduling.core.types``) and back (ARCHITECTURE.md, "Data flow of a round"):

1. :class:`RoundLease` — only one round at a time: a :class:`~scheduling.models.SchedulerLease`
   row claimed by a conditional UPDATE, plus, on PostgreSQL, a session advisory lock. The advisory
   lock dies with its connection, so a round whose worker was killed does not keep the lease until
   it expires: the next round takes the advisory lock and then the row.
2. :func:`load_state` / :func:`build_snapshot` — GPUs, running placements, pending jobs and quotas
   as a :class:`~scheduling.core.types.Snapshot`. Core GPU ids are dense (0 … N−1, ordered by node
   name then index); :class:`ClusterState` maps them back to ``GPU`` primary keys.
3. The configured policy (setting ``SHAREWISE_POLICY``, default ``sjf-bsbf``) decides.
4. :func:`run_round` writes, in one transaction: the new ``Placement`` rows (slot 0 or 1, so the
   database's "at most two active jobs per GPU" constraint holds), the jobs' status, ``JobEvent``
   rows and the :class:`~scheduling.models.Round` record with every decision and its reason.
5. After commit, one ``sharewise.apply_placement`` message per (job, node) change goes to the
   dispatcher: Celery ``send_task`` to queue ``node.<name>`` when a broker is configured, else the
   in-process subscribers (:func:`subscribe`; the demo's emulated agents). Message fields:
   ``docs/AGENT.md`` §1.

Generations (AGENT.md §1): every change sent for a job gets ``1 +`` the highest generation any
``Placement`` row of that job ever carried. A placement row's ``generation`` is the latest one sent
about the job on that GPU: an ``update`` (the partner changed) raises it on the active rows, and a
``stop`` (preemption) writes it on the rows it deactivates, so the next ``start`` is always higher.
Each message of a round is also recorded in a ``JobEvent``'s ``data["generation"]`` (``placed``
for a start, ``preempted`` for a stop; updates are not job events), so the *floor* of AGENT.md §2
(the last start or stop sent) is the ``placed`` generation while the job holds GPUs, else the
highest generation of its rows. :func:`stop_job` sends the ``stop`` for a job whose placement
ended outside a round (a cancel).

Units: seconds (s), MB, GPUs, iterations. Times given to the core are POSIX timestamps (s).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import F, Max, Model, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from cluster.expressions import EpochSeconds
from cluster.models import GPU, Job, JobEvent, Node, Placement, Quota
from scheduling.core import types as core
from scheduling.core.policies import get_policy
from scheduling.models import Round, SchedulerLease
from scheduling.profiles import load_default_profile

log = logging.getLogger(__name__)

DEFAULT_POLICY = "sjf-bsbf"
#: Name of the lease row every round claims.
ROUND_LEASE = "scheduling-round"
#: A lease not released (its holder died) is free again after this long (s), setting
#: ``SHAREWISE_ROUND_LEASE_S``. On PostgreSQL the advisory lock frees it at once.
DEFAULT_LEASE_S = 120.0
#: A node silent for longer than this (s) is unreachable: its GPUs take no new job (setting
#: ``SHAREWISE_HEARTBEAT_TIMEOUT_S``; AGENT.md §3 suggests three heartbeat intervals of 5 s).
DEFAULT_HEARTBEAT_TIMEOUT_S = 15.0
#: Recorded rounds kept (the oldest are deleted as new ones are written), setting
#: ``SHAREWISE_ROUNDS_KEPT``: a round with 10,000 decisions is about 80 KB compressed in PostgreSQL.
DEFAULT_ROUNDS_KEPT = 5000
#: Exclusive iteration time assumed for a model the profile does not know (s) **(ours)**.
UNKNOWN_MODEL_ITER_TIME_S = 1.0

Message = dict[str, Any]
"""One ``sharewise.apply_placement`` payload (AGENT.md §1), JSON-serialisable."""


def setting(name: str, default: Any) -> Any:
    """``settings.<name>``, or ``default`` when the project does not set it."""
    return getattr(settings, name, default)


def heartbeat_timeout_s() -> float:
    """Seconds of silence after which a node is unreachable (``SHAREWISE_HEARTBEAT_TIMEOUT_S``)."""
    return float(setting("SHAREWISE_HEARTBEAT_TIMEOUT_S", DEFAULT_HEARTBEAT_TIMEOUT_S))


# ---------------------------------------------------------------------------------------- lease


def _advisory_key(name: str) -> int:
    """A signed 64-bit key for ``pg_try_advisory_lock`` derived from the lease name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


#: Leases this process holds now (see :meth:`RoundLease.acquire`).
_HELD_HERE: set[str] = set()


class RoundLease:
    """The lease that lets one round run at a time, across processes and machines.

    ``acquire()`` returns whether this holder got it. On PostgreSQL it first takes the session
    advisory lock ``pg_try_advisory_lock(key(name))`` (released when the connection closes, e.g.
    when a worker is killed); holding it proves that a holder recorded in the row by another
    process is dead, so the row is taken over. Everywhere, the row is claimed by one conditional
    UPDATE (``holder`` empty or expired; on PostgreSQL also any holder that is not a lease of this
    process) and counts only if exactly one row changed (the pattern of healthchecks'
    ``sendalerts``). Must be used in autocommit mode (not inside ``transaction.atomic``) so other
    processes see the claim; the advisory lock needs session-level connections (no PgBouncer
    transaction pooling).
    """

    def __init__(self, name: str = ROUND_LEASE, duration_s: float | None = None) -> None:
        self.name = name
        self.duration_s = float(
            duration_s if duration_s is not None else setting("SHAREWISE_ROUND_LEASE_S", DEFAULT_LEASE_S)
        )
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._advisory = False

    @property
    def uses_advisory_lock(self) -> bool:
        """Whether the database offers advisory locks (PostgreSQL)."""
        return connection.vendor == "postgresql"

    def acquire(self) -> bool:
        """Claim the lease; ``True`` if this holder now has it, ``False`` if another round does."""
        if self.uses_advisory_lock:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [_advisory_key(self.name)])
                if not cursor.fetchone()[0]:
                    return False
            self._advisory = True
        SchedulerLease.objects.get_or_create(name=self.name)
        now = timezone.now()
        free = Q(holder="") | Q(expires_at__lt=now)
        if self._advisory:
            # Under the advisory lock, a holder in the row is dead (a live one keeps the advisory
            # lock while it holds the row) unless it is a lease of this very process: PostgreSQL
            # advisory locks are re-entrant within one connection.
            free |= ~Q(holder__in=_HELD_HERE) if _HELD_HERE else Q(pk__isnull=False)
        claimed = SchedulerLease.objects.filter(free, name=self.name).update(
            holder=self.holder, expires_at=now + timedelta(seconds=self.duration_s)
        )
        if claimed != 1:
            self._unlock()
            return False
        _HELD_HERE.add(self.holder)
        return True

    def release(self) -> None:
        """Give the lease back (only if this holder still has it) and drop the advisory lock."""
        try:
            SchedulerLease.objects.filter(name=self.name, holder=self.holder).update(
                holder="", expires_at=timezone.now()
            )
        finally:
            _HELD_HERE.discard(self.holder)
            self._unlock()

    def _unlock(self) -> None:
        if self._advisory:
            self._advisory = False
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [_advisory_key(self.name)])


# ------------------------------------------------------------------------------------- snapshot


def estimate_iter_time_s(profile: core.Profile, model: str, batch_size: int, gpus: int) -> float:
    """Exclusive time of one iteration at global batch ``batch_size`` on ``gpus`` GPUs (s),
    from the profile's measured throughputs, for a job that did not give its own.

    The model maps to the nearest measured Gavel job type ``T`` at batch ``b_T``
    (``TableProfile.job_type_for``); one step of ``T`` on ``gpus`` GPUs takes
    ``1 / isolated_throughput(T, gpus)`` s for ``b_T`` samples, so an iteration done as
    ``batch_size / b_T`` micro-steps of ``b_T`` takes ``t(b_T) = (batch_size / b_T) / steps_per_s``,
    and ``t(B) = t(b_T) · sps(b_T) / sps(B)`` (MODEL.md §1, the profile's samples/s curve; the
    ratio is ``profile.iter_time_s`` of a job with ``t(B) = 1``). A model of unknown family, or a
    profile without throughputs, gets :data:`UNKNOWN_MODEL_ITER_TIME_S` **(ours)**.
    """
    job_type_for = getattr(profile, "job_type_for", None)
    throughput = getattr(profile, "isolated_throughput", None)
    job_type = job_type_for(model, batch_size) if job_type_for else None
    if job_type is None or throughput is None:
        return UNKNOWN_MODEL_ITER_TIME_S
    from scheduling.core.profiles import ProfileError, split_gavel_job_type

    try:
        steps_per_s = throughput(job_type, gpus)
    except ProfileError:
        return UNKNOWN_MODEL_ITER_TIME_S
    type_batch = split_gavel_job_type(job_type)[1]
    if type_batch is None:  # an RL job type: one step is one iteration
        return 1.0 / steps_per_s
    unit = core.Job(0, "", model, batch_size, gpus, 1, 0.0, 1.0)
    ratio = profile.iter_time_s(unit, type_batch)  # sps(B) / sps(b_T)
    return (batch_size / type_batch) / steps_per_s / ratio


@dataclass(slots=True)
class ClusterState:
    """A snapshot plus the maps back to database rows.

    ``gpu_pks[i]`` / ``gpu_labels[i]`` (``"node-00:3"``): core GPU id ``i``; ``gpu_ids``: the
    inverse (pk → core id). ``residents[i]``: ``[(job pk, slot, sub-batch)]`` of the active
    placements on GPU ``i``. ``jobs``: every pending or running core ``Job`` by pk.
    """

    snapshot: core.Snapshot
    gpu_pks: tuple[int, ...]
    gpu_labels: tuple[str, ...]
    gpu_ids: dict[int, int]
    residents: dict[int, list[tuple[int, int, int]]]
    jobs: dict[int, core.Job]

    def node_and_index(self, gpu_id: int) -> tuple[str, int]:
        """``("node-00", 3)`` for core GPU id ``gpu_id``."""
        gpu = self.snapshot.cluster.gpus[gpu_id]
        return gpu.node, gpu.index


def node_takes_jobs(status: str, last_heartbeat: datetime | None, now: datetime, timeout_s: float) -> bool:
    """Whether a node takes new jobs: ``ready``, and heard from within ``timeout_s`` — or never
    heard from yet (a node an admin registered is trusted until it has sent a first heartbeat;
    embedded emulated agents may never send one)."""
    if status != Node.Status.READY:
        return False
    return last_heartbeat is None or (now - last_heartbeat).total_seconds() <= timeout_s


def attained_after_run(now: datetime) -> Any:
    """``Job.attained_gpu_s`` once the job's current run ends at ``now`` without finishing
    (preempted, requeued), as an expression for the UPDATE that ends the run, so the service
    is added in that same statement (nothing half-written): stored + ``gpus × max(0, now − start)``
    GPU-s, where ``start`` is the ``created_at`` of the job's earliest active placement (a round
    writes all rows of a start at once; ``started_at`` is the first start ever, wrong after a
    preemption). Evaluate it before the run's placements become inactive; a job with no active
    placement keeps its stored value. The database computes the seconds (:class:`EpochSeconds`:
    µs on PostgreSQL, ms on SQLite)."""
    now_s = Value(now.timestamp())
    first = Placement.objects.filter(job_id=OuterRef("pk"), active=True).order_by("created_at")
    start_s = Coalesce(EpochSeconds(Subquery(first.values("created_at")[:1])), now_s)
    return F("attained_gpu_s") + F("gpus") * Greatest(Value(0.0), now_s - start_s)


def load_state(now: datetime | None = None, profile: core.Profile | None = None) -> ClusterState:
    """Read the cluster from the database as a :class:`ClusterState` (6 queries).

    - GPUs: every registered GPU, ordered by node name and index; ``healthy`` is False for an
      unhealthy GPU and for every GPU of a node that is not ``ready`` (unhealthy, draining) or
      whose last heartbeat is older than ``SHAREWISE_HEARTBEAT_TIMEOUT_S`` (unreachable).
    - Pending jobs (status ``pending``) and running jobs (status ``running`` with active
      placements; their ``Placement`` carries the GPUs, the sub-batch and the first placement's
      creation time). ``iter_time_s`` is the job's ``iteration_time_s`` or
      :func:`estimate_iter_time_s`; ``memory_mb`` its ``gpu_memory_mb`` (``None``: the profile's);
      ``attained_gpu_s`` (GPU-s) of a pending job is its stored ``Job.attained_gpu_s`` (the service
      of its earlier runs, :func:`attained_after_run`); of a running job, that plus
      ``gpus × (now − created_at of its current run's first active placement)``, so service
      before a preemption or requeue counts (as in the simulator). ``queued_since`` of a pending
      job that ran before is the time of its latest ``preempted`` or ``requeued`` event (its wait
      starts again, docs/FAIRNESS.md §2).
    - ``tenant_quotas``: :func:`tenant_quotas`; ``config``: :func:`scheduler_config`.
    """
    now = now or timezone.now()
    profile = profile or load_default_profile()
    timeout_s = heartbeat_timeout_s()
    gpu_rows = GPU.objects.order_by("node__name", "index").values_list(
        "pk",
        "index",
        "memory_mb",
        "gpu_type",
        "healthy",
        "node__name",
        "node__status",
        "node__last_heartbeat",
    )
    gpus: list[core.GPU] = []
    gpu_pks: list[int] = []
    labels: list[str] = []
    for i, (pk, index, memory, gpu_type, healthy, node, status, heartbeat) in enumerate(gpu_rows):
        ok = healthy and node_takes_jobs(status, heartbeat, now, timeout_s)
        gpus.append(core.GPU(i, node, index, memory, gpu_type, ok))
        gpu_pks.append(pk)
        labels.append(f"{node}:{index}")
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

    estimates: dict[tuple[str, int, int], float] = {}
    now_s = now.timestamp()
    pending: list[core.Job] = []
    running: list[core.RunningJob] = []
    jobs: dict[int, core.Job] = {}
    query = (
        Job.objects.filter(status__in=Job.ACTIVE_STATUSES)
        .annotate(submit_s=EpochSeconds(F("submitted_at")))
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
        )
        .order_by()
    )
    # Every column is a plain number or string, so the ORM's per-row converters (a third of the
    # snapshot's time at 10,000 jobs) are skipped: the compiled query runs on a bare cursor.
    with connection.cursor() as cursor:
        cursor.execute(*query.query.sql_with_params())
        rows = cursor.fetchall()
    # only pending jobs that ran before can have re-entered the queue
    requeued_at: dict[int, float] = dict(
        JobEvent.objects.filter(
            job__status=Job.Status.PENDING,
            job__started_at__isnull=False,
            kind__in=(JobEvent.Kind.PREEMPTED, JobEvent.Kind.REQUEUED),
        )
        .order_by()
        .values("job_id")
        .annotate(t=EpochSeconds(Max("at")))
        .values_list("job_id", "t")
    )
    for (
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
    ) in rows:
        if iter_s is None:
            key = (model, batch, n_gpus)
            iter_s = estimates.get(key)
            if iter_s is None:
                iter_s = estimates[key] = estimate_iter_time_s(profile, model, batch, n_gpus)
        attained = float(stored)
        run = placed.get(pk) if status == Job.Status.RUNNING else None
        if run is not None:  # plus the current run, from its first active placement
            attained += n_gpus * max(0.0, now_s - run[2].timestamp())
        queued = requeued_at.get(pk) if status == Job.Status.PENDING else None
        job = core.Job(
            pk,
            tenant,
            model,
            batch,
            n_gpus,
            iterations,
            submitted,
            iter_s,
            None if memory is None else float(memory),
            float(done),
            attained,
            queued,
            priority,
        )
        jobs[pk] = job
        if status == Job.Status.PENDING:
            pending.append(job)
        elif pk in placed:
            ids, sub_batch, first = placed[pk]
            running.append(
                core.RunningJob(job, core.Placement(pk, tuple(sorted(ids)), sub_batch, first.timestamp()))
            )
    snapshot = core.Snapshot(
        now_s, core.Cluster(tuple(gpus)), tuple(pending), tuple(running), scheduler_config(), tenant_quotas()
    )
    return ClusterState(snapshot, tuple(gpu_pks), tuple(labels), gpu_ids, dict(residents), jobs)


def scheduler_config() -> core.SchedulerConfig:
    """The :class:`~scheduling.core.types.SchedulerConfig` of every round, from the settings
    ``SHAREWISE_STARVATION_BOUND_S`` (s, default 48 h), ``SHAREWISE_AGING_S`` (s, 1 h),
    ``SHAREWISE_RECLAIM`` (``preempt``, ``bound`` or ``both``) and ``SHAREWISE_BORROW_BOUND_S``
    (s, 1 h) (docs/FAIRNESS.md §1–2). Raises ``ImproperlyConfigured`` for a non-positive time or
    an unknown reclaim mode."""
    defaults = core.SchedulerConfig()
    try:
        return core.SchedulerConfig(
            starvation_bound_s=float(setting("SHAREWISE_STARVATION_BOUND_S", defaults.starvation_bound_s)),
            aging_s=float(setting("SHAREWISE_AGING_S", defaults.aging_s)),
            reclaim=str(setting("SHAREWISE_RECLAIM", defaults.reclaim)),
            borrow_bound_s=float(setting("SHAREWISE_BORROW_BOUND_S", defaults.borrow_bound_s)),
        )
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"scheduler settings: {exc}") from exc


def summed_quotas(rows: Iterable[tuple[Any, int, int | None]]) -> dict[Any, core.TenantQuota]:
    """``{key: TenantQuota}`` from ``Quota`` rows ``(key, guaranteed_gpus, borrow_limit)`` (key: a
    tenant's name or id), summed over a tenant's rows (one per GPU type): the core has no GPU types
    in its quotas, so ``guaranteed_gpus`` = Σ guaranteed and ``borrow_limit`` = ``None``
    (unlimited) if any row has no limit, else Σ borrow limits **(ours)**."""
    guaranteed: dict[Any, int] = defaultdict(int)
    borrow: dict[Any, int | None] = {}
    for key, gpus, limit in rows:
        guaranteed[key] += gpus
        so_far = borrow.get(key, 0)
        borrow[key] = None if so_far is None or limit is None else so_far + limit
    return {key: core.TenantQuota(total, borrow[key]) for key, total in guaranteed.items()}


def tenant_quotas() -> dict[str, core.TenantQuota]:
    """Each tenant's :class:`~scheduling.core.types.TenantQuota` by tenant name, from its ``Quota``
    rows (1 query; :func:`summed_quotas`). Tenants without a row are absent (no guarantee; they may
    only borrow, docs/FAIRNESS.md §1)."""
    return summed_quotas(
        Quota.objects.order_by().values_list("tenant__name", "guaranteed_gpus", "borrow_limit")
    )


def build_snapshot(now: datetime | None = None) -> core.Snapshot:
    """The :class:`~scheduling.core.types.Snapshot` a policy sees at ``now`` (see :func:`load_state`)."""
    return load_state(now).snapshot


# -------------------------------------------------------------------------------------- dispatch

Dispatcher = Callable[[Sequence[Message]], None]
_subscribers: list[Callable[[Message], None]] = []


def subscribe(callback: Callable[[Message], None]) -> None:
    """Receive every placement message in-process (no broker; e.g. the demo's emulated agents)."""
    if callback not in _subscribers:
        _subscribers.append(callback)


def unsubscribe(callback: Callable[[Message], None]) -> None:
    """Stop sending placement messages to ``callback`` (no error if it was not subscribed)."""
    if callback in _subscribers:
        _subscribers.remove(callback)


def local_dispatch(messages: Sequence[Message]) -> None:
    """Hand each message to every in-process subscriber, in order; a failing subscriber is logged
    and does not stop the others (heartbeat reconciliation repairs what it missed)."""
    for message in messages:
        for callback in list(_subscribers):
            try:
                callback(message)
            except Exception:
                log.exception("placement subscriber %r failed on job %s", callback, message.get("job_id"))


def celery_dispatch(messages: Sequence[Message]) -> None:
    """Send each message as task ``sharewise.apply_placement`` to queue ``node.<node>`` (JSON),
    over one broker connection, batched (kombu's ``Producer.batch``: one Redis pipeline instead of
    a round trip per message)."""
    from config.celery import app

    if not messages:
        return
    with app.producer_or_acquire() as producer, producer.batch():
        for message in messages:
            # kwargsrepr given: Celery would otherwise build a safe repr of every payload for logs.
            label = f"{{job {message['job_id']} {message['action']} g{message['generation']}}}"
            app.send_task(
                "sharewise.apply_placement",
                kwargs=message,
                queue=f"node.{message['node']}",
                serializer="json",
                producer=producer,
                argsrepr="()",
                kwargsrepr=label,
            )


def broker_configured() -> bool:
    """Whether a real Celery broker is configured (not the in-memory embedded default)."""
    url = str(setting("CELERY_BROKER_URL", "") or "")
    return bool(url) and not url.startswith("memory://") and not setting("CELERY_TASK_ALWAYS_EAGER", False)


_dispatcher_override: Dispatcher | None = None


def set_dispatcher(dispatcher: Dispatcher | None) -> None:
    """Use ``dispatcher`` for every later round (``None``: back to the automatic choice)."""
    global _dispatcher_override
    _dispatcher_override = dispatcher


def get_dispatcher() -> Dispatcher:
    """The override set by :func:`set_dispatcher`, else Celery with a broker, else in-process."""
    if _dispatcher_override is not None:
        return _dispatcher_override
    return celery_dispatch if broker_configured() else local_dispatch


# ------------------------------------------------------------------------------------- the round


@dataclass(slots=True)
class _Plan:
    """What one round writes; filled by :func:`_persist`."""

    decisions: list[dict[str, Any]] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    n_started: int = 0
    n_waiting: int = 0
    n_preempted: int = 0


_policies: dict[str, core.Policy] = {}


def policy_named(name: str | None = None) -> core.Policy:
    """The policy object for ``name`` (default: setting ``SHAREWISE_POLICY``, else ``sjf-bsbf``),
    kept between rounds so its pure caches are reused. Raises ``UnknownPolicyError``."""
    name = name or setting("SHAREWISE_POLICY", DEFAULT_POLICY)
    policy = _policies.get(name)
    if policy is None:
        policy = _policies[name] = get_policy(name)
    return policy


def run_round(
    now: datetime | None = None, policy: str | core.Policy | None = None, profile: core.Profile | None = None
) -> Round | None:
    """Run one scheduling round; ``None`` when another round holds the lease.

    Takes the :class:`RoundLease`, reads the snapshot, asks the policy (``policy``: a name or an
    object; default setting ``SHAREWISE_POLICY``), then in one transaction writes placements,
    job status, events and the :class:`~scheduling.models.Round`; messages are dispatched after
    commit. A round that changes nothing and decides exactly what the last recorded round decided
    is not stored again: the returned ``Round`` is then unsaved (``pk`` is ``None``).
    ``round.phases_ms`` gives the time of each phase (ms): ``snapshot``, ``policy``, ``persist``
    (stored with the record), then ``commit`` and ``dispatch`` (on the returned object only).
    Raises ``UnknownPolicyError`` for an unknown policy name; a database error rolls the whole
    round back (nothing of it is written) and propagates.
    """
    chosen = policy if policy is not None and not isinstance(policy, str) else policy_named(policy)
    profile = profile or load_default_profile()
    lease = RoundLease()
    if not lease.acquire():
        log.info("round skipped: another round holds the lease")
        return None
    try:
        return _locked_round(now or timezone.now(), chosen, profile)
    finally:
        lease.release()


def _locked_round(now: datetime, policy: core.Policy, profile: core.Profile) -> Round:
    t0 = time.perf_counter()
    with transaction.atomic():
        state = load_state(now, profile)
        t1 = time.perf_counter()
        decisions = policy.decide(state.snapshot, profile, explain=True)
        t2 = time.perf_counter()
        plan = _persist(state, decisions, profile, now)
        record = Round(
            started_at=now,
            policy=decisions.policy,
            n_started=plan.n_started,
            n_waiting=plan.n_waiting,
            n_preempted=plan.n_preempted,
            decisions=plan.decisions,
        )
        if plan.n_started or plan.n_preempted or plan.messages:
            record.save()  # a round that changed something is never a repeat: no digest needed
        else:
            record.digest = hashlib.sha256(json.dumps([record.policy, plan.decisions]).encode()).hexdigest()
            if Round.objects.order_by("-id").values_list("digest", flat=True).first() != record.digest:
                record.save()
        t3 = time.perf_counter()
        record.phases_ms = {
            "snapshot": round((t1 - t0) * 1e3, 3),
            "policy": round((t2 - t1) * 1e3, 3),
            "persist": round((t3 - t2) * 1e3, 3),
        }
        record.duration_ms = round((t3 - t0) * 1e3, 3)
        record.finished_at = timezone.now()
        if record.pk is not None:
            Round.objects.filter(pk=record.pk).update(
                phases_ms=record.phases_ms, duration_ms=record.duration_ms, finished_at=record.finished_at
            )
            kept = int(setting("SHAREWISE_ROUNDS_KEPT", DEFAULT_ROUNDS_KEPT))
            Round.objects.filter(pk__lte=record.pk - kept).delete()
        messages = plan.messages
        if messages:
            transaction.on_commit(lambda: _dispatch(record, messages), robust=True)
    # the dispatch ran inside the commit (on_commit): count it once, as itself
    after = (time.perf_counter() - t3) * 1e3 - record.phases_ms.get("dispatch", 0.0)
    record.phases_ms["commit"] = round(after, 3)
    return record


def _dispatch(record: Round, messages: Sequence[Message]) -> None:
    started = time.perf_counter()
    get_dispatcher()(messages)
    record.phases_ms["dispatch"] = round((time.perf_counter() - started) * 1e3, 3)


def _persist(
    state: ClusterState, decisions: core.RoundDecisions, profile: core.Profile, now: datetime
) -> _Plan:
    """Write one round's preemptions, starts and partner updates; return the decisions and the
    messages to send after commit. Preemptions first (a start may use the GPUs they free)."""
    plan = _Plan()
    occupied: dict[int, dict[int, tuple[int, int]]] = {
        g: {slot: (job, sub) for job, slot, sub in rows} for g, rows in state.residents.items()
    }
    job_gpus: dict[int, list[int]] = defaultdict(list)
    for g, slots in occupied.items():
        for job, _ in slots.values():
            job_gpus[job].append(g)
    starting = [s.job_id for s in decisions.starts]
    touched = [p.job_id for p in decisions.preemptions] + starting
    generation = _next_generations(touched)
    changed_partners: set[int] = set()

    # -- preemptions: the job goes back to the queue; its partners get an update
    preempted = set(
        Job.objects.filter(
            pk__in=[p.job_id for p in decisions.preemptions], status=Job.Status.RUNNING
        ).values_list("pk", flat=True)
    )
    if preempted:  # back to the queue, the run's service added (before its placements end)
        Job.objects.filter(pk__in=preempted, status=Job.Status.RUNNING).update(
            status=Job.Status.PENDING, attained_gpu_s=attained_after_run(now)
        )
    events: list[JobEvent] = []
    for p in decisions.preemptions:
        if p.job_id not in preempted:
            reason = f"not preempted: no longer running ({p.reason})"
            plan.decisions.append(_decision(p.job_id, "wait", reason))
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
            active=False, ended_at=now, generation=gen
        )
        plan.messages.extend(_messages(state, profile, occupied, p.job_id, gpu_ids, gen, "stop"))
        events.append(
            JobEvent(
                job_id=p.job_id,
                kind=JobEvent.Kind.PREEMPTED,
                at=now,
                message=p.reason,
                data={"generation": gen},
            )
        )
        plan.decisions.append(_decision(p.job_id, "preempt", p.reason, state, gpu_ids))
        plan.n_preempted += 1

    # -- starts: only jobs still pending (a cancel may have won the race); gangs all or nothing
    still_pending = (
        set(
            Job.objects.select_for_update()
            .filter(pk__in=starting, status=Job.Status.PENDING)
            .values_list("pk", flat=True)
        )
        if starting
        else set()
    )
    new_rows: list[Placement] = []
    started: list[core.Start] = []
    for s in decisions.starts:
        reason = None if s.job_id in still_pending else "no longer pending when the round wrote placements"
        slots_for: list[int] = []
        if reason is None:
            for g in s.gpu_ids:
                free = [slot for slot in (0, 1) if slot not in occupied.get(g, {})]
                if not free:
                    reason = f"GPU {state.gpu_labels[g]} already holds two jobs"
                    break
                slots_for.append(free[0])
        if reason is not None:
            plan.decisions.append(_decision(s.job_id, "wait", reason))
            plan.n_waiting += 1
            continue
        gen = generation[s.job_id]
        for g, slot in zip(s.gpu_ids, slots_for, strict=True):
            changed_partners.update(job for job, _ in occupied.get(g, {}).values())
            occupied.setdefault(g, {})[slot] = (s.job_id, s.sub_batch)
            new_rows.append(
                Placement(
                    job_id=s.job_id,
                    gpu_id=state.gpu_pks[g],
                    generation=gen,
                    sub_batch=s.sub_batch,
                    slot=slot,
                    created_at=now,
                )
            )
        job_gpus[s.job_id] = list(s.gpu_ids)
        started.append(s)
    insert_rows(
        Placement, new_rows, ("job", "gpu", "generation", "sub_batch", "slot", "active", "created_at")
    )
    started_ids = [s.job_id for s in started]
    if started_ids:
        Job.objects.filter(pk__in=started_ids, status=Job.Status.PENDING).update(
            status=Job.Status.RUNNING, started_at=Coalesce(F("started_at"), Value(now))
        )
        commands = dict(Job.objects.filter(pk__in=started_ids).values_list("pk", "command"))
    for s in started:
        decision = _decision(s.job_id, "start", s.reason, state, s.gpu_ids, s)
        plan.decisions.append(decision)
        events.append(
            JobEvent(
                job_id=s.job_id,
                kind=JobEvent.Kind.PLACED,
                at=now,
                message=s.reason,
                data={
                    "generation": generation[s.job_id],
                    "gpus": decision["gpus"],
                    "sub_batch": s.sub_batch,
                    "accum_steps": s.accum_steps,
                },
            )
        )
        plan.messages.extend(
            _messages(
                state,
                profile,
                occupied,
                s.job_id,
                s.gpu_ids,
                generation[s.job_id],
                "start",
                commands[s.job_id],
            )
        )
        plan.n_started += 1

    # -- updates: running jobs whose GPU partner started or left get their new slowdown
    partners = sorted(changed_partners - set(started_ids) - preempted)
    if partners:
        update_gen = _next_generations(partners)
        commands = dict(Job.objects.filter(pk__in=partners).values_list("pk", "command"))
        for job_pk in partners:
            gen = update_gen[job_pk]
            Placement.objects.filter(job_id=job_pk, active=True).update(generation=gen)
            plan.messages.extend(
                _messages(
                    state,
                    profile,
                    occupied,
                    job_pk,
                    sorted(job_gpus[job_pk]),
                    gen,
                    "update",
                    commands.get(job_pk, ""),
                )
            )
    insert_rows(JobEvent, events, ("job", "kind", "at", "message", "data"))

    for w in decisions.waits:
        plan.decisions.append(_decision(w.job_id, "wait", w.reason))
        plan.n_waiting += 1
    return plan


def insert_rows(model: type[Model], objects: Sequence[Model], fields: Sequence[str]) -> None:
    """Insert ``objects`` (unsaved, their primary keys are not read back) setting ``fields``:
    ``COPY … FROM STDIN`` on PostgreSQL (psycopg 3; several times faster than a multi-row INSERT
    for a thousand rows, most of whose cost is building the SQL), ``bulk_create`` elsewhere."""
    if not objects:
        return
    if connection.vendor != "postgresql":
        model.objects.bulk_create(objects, batch_size=2000)
        return
    columns = [model._meta.get_field(name) for name in fields]
    quote = connection.ops.quote_name
    sql = f"COPY {quote(model._meta.db_table)} ({', '.join(quote(c.column) for c in columns)}) FROM STDIN"
    from psycopg.types.json import Jsonb

    # Raw attribute values: psycopg adapts ints, strings and aware datetimes itself, and Django's
    # per-field preparation would cost more than the COPY (only JSON needs wrapping).
    attnames = [c.attname for c in columns]
    is_json = [c.get_internal_type() == "JSONField" for c in columns]
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for obj in objects:
            copy.write_row(
                [
                    Jsonb(v) if j else v
                    for v, j in zip([getattr(obj, a) for a in attnames], is_json, strict=True)
                ]
            )


def stop_job(job_id: int) -> list[Message]:
    """Tell the agents to stop a job whose placement ended outside a round (e.g. a cancel).

    One ``stop`` (AGENT.md §1) per node of the job's latest placement (its rows of the highest
    generation, active or not), with a new generation that is also written on those rows; sent
    by the dispatcher after the current transaction commits. Returns the messages (``[]`` for a
    job that never held a GPU). A ``stop`` for a job an agent does not run changes nothing there.
    """
    with transaction.atomic():
        latest = Placement.objects.filter(job_id=job_id).aggregate(g=Max("generation"))["g"]
        if latest is None:
            return []
        rows = Placement.objects.filter(job_id=job_id, generation=latest)
        nodes = sorted(set(rows.values_list("gpu__node__name", flat=True)))
        rows.update(generation=latest + 1)
        messages: list[Message] = [
            {"node": node, "job_id": job_id, "generation": latest + 1, "action": "stop"} for node in nodes
        ]
        transaction.on_commit(lambda: get_dispatcher()(messages), robust=True)
    return messages


def _next_generations(job_ids: Iterable[int]) -> dict[int, int]:
    """``1 +`` the highest generation any placement row of each job carries (1 for a new job)."""
    ids = list(job_ids)
    if not ids:
        return {}
    highest = dict(
        Placement.objects.filter(job_id__in=ids)
        .order_by()
        .values("job_id")
        .annotate(g=Max("generation"))
        .values_list("job_id", "g")
    )
    return {pk: highest.get(pk, 0) + 1 for pk in ids}


def _decision(
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


def slowdown_of(
    profile: core.Profile,
    jobs: dict[int, core.Job],
    job_pk: int,
    sub_batch: int,
    partners: Iterable[tuple[int, int]],
) -> float:
    """ξ of job ``job_pk`` at ``sub_batch`` given its partner ``(job pk, sub-batch)`` on each GPU
    it shares: the largest ``profile.slowdown(...)[0]`` (a gang runs at the pace of its slowest
    GPU, MODEL.md §2); 1 when it shares none."""
    job = jobs[job_pk]
    xi = 1.0
    for partner, partner_sub in partners:
        xi = max(xi, profile.slowdown(job, sub_batch, jobs[partner], partner_sub)[0])
    return xi


def _messages(
    state: ClusterState,
    profile: core.Profile,
    occupied: dict[int, dict[int, tuple[int, int]]],
    job_pk: int,
    gpu_ids: Iterable[int],
    generation: int,
    action: str,
    command: str = "",
) -> list[Message]:
    """One message per node holding some of ``gpu_ids`` (AGENT.md §1)."""
    by_node: dict[str, list[int]] = defaultdict(list)
    for g in gpu_ids:
        node, index = state.node_and_index(g)
        by_node[node].append(index)
    if action == "stop":
        return [
            {"node": node, "job_id": job_pk, "generation": generation, "action": "stop"} for node in by_node
        ]
    job = state.jobs[job_pk]
    sub_batch = next(sub for g in gpu_ids for j, sub in occupied[g].values() if j == job_pk)
    partners = [(j, sub) for g in gpu_ids for j, sub in occupied[g].values() if j != job_pk]
    xi = slowdown_of(profile, state.jobs, job_pk, sub_batch, partners)
    common = {
        "generation": generation,
        "action": action,
        "sub_batch": sub_batch,
        "accum_steps": job.batch_size // sub_batch,
        "batch_size": job.batch_size,
        "iterations": job.iterations,
        "iterations_done": min(job.iterations_done, job.iterations),
        "iter_time_s": profile.iter_time_s(job, sub_batch),
        "slowdown": xi,
        "command": command,
        "model": job.model,
    }
    return [
        {"node": node, "job_id": job_pk, "gpu_indices": sorted(indices), **common}
        for node, indices in by_node.items()
    ]
