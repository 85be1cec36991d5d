"""Tenants, quotas, nodes, GPUs, jobs, placements and the job history.

Units: memory in MB, time in seconds, progress in training iterations, batch sizes in samples.
The invariants the scheduler relies on are database constraints, so they hold whatever code
writes the rows: a GPU holds at most two active placements (``slot`` 0 or 1, unique per GPU
among active rows; the paper's pairs, Luo et al. IWQoS 2024), a job is on a GPU at most once,
quotas are non-negative, an idempotency key is used once per tenant.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import IntegrityError, connection, models, transaction
from django.db.models import Max, Q, Sum
from django.utils import timezone

from cluster.api_tokens import ApiToken
from cluster.expressions import run_end
from common.limits import MAX_BATCH_SIZE as MAX_BATCH_SIZE
from common.limits import MAX_GPU_MEMORY_MB as MAX_GPU_MEMORY_MB
from common.limits import MAX_ITERATION_TIME_S as MAX_ITERATION_TIME_S
from common.limits import MAX_ITERATIONS as MAX_ITERATIONS
from common.shapes import MAX_GPUS_PER_NODE
from common.tokens import hash_token, new_token

NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$"
name_validator = RegexValidator(
    NAME_PATTERN, "use 1-64 lowercase letters, digits and inner hyphens (e.g. 'team-a')"
)

#: Longest command the API accepts (characters); the other bounds are common.limits' (above).
MAX_COMMAND_LENGTH = 4096
#: Largest guaranteed quota or borrowing limit a tenant may be given (GPUs) **(ours)**: far above any
#: real cluster, far below the database's integer range.
MAX_QUOTA_GPUS = 1_000_000
#: Most nodes of a NODESxGPUS shape the live cluster registers at once (load_cluster, demo) **(ours)**.
MAX_SHAPE_NODES = 9999
#: Largest generation an agent may report (AGENT.md §1–2): a placement's generation column holds
#: at most 2**31 - 1 (``PositiveIntegerField`` on every database), and a ``stop`` for a job a node
#: should not run goes out one above the generation it reported.
MAX_REPORTED_GENERATION = 2**31 - 2
#: Largest id a request may name in its body (64-bit primary keys).
MAX_ID = 2**63 - 1


def validate_name(name: str, what: str) -> None:
    """Raise ``ValueError`` with a readable message unless ``name`` matches :data:`NAME_PATTERN`."""
    try:
        name_validator(name)
    except ValidationError as exc:
        raise ValueError(f"bad {what} name {name!r}: {exc.messages[0]}") from None


class Sharing(models.TextChoices):
    """Whether a job may share its GPUs with another job (co-location, MODEL.md §2)."""

    ALLOWED = "allowed"
    NEVER = "never"


class Tenant(models.Model):
    """A team sharing the cluster; owns jobs, members and quotas.

    ``default_sharing``: the ``sharing`` of the tenant's jobs submitted without one (an admin
    sets it; ``never``: the tenant's jobs never share a GPU unless a job says ``allowed``).
    """

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    created_at = models.DateTimeField(default=timezone.now)
    default_sharing = models.CharField(max_length=8, choices=Sharing.choices, default=Sharing.ALLOWED)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def create_with_owner(
        cls, name: str, quota_gpus: int, borrow_limit: int | None = None, username: str | None = None
    ) -> tuple[Tenant, str]:
        """Create tenant ``name`` with a quota of ``quota_gpus`` GPUs and a first member (role owner).

        The member's user name defaults to ``<name>-owner``. Returns the tenant and the member's
        API token. Raises ``ValueError`` for a bad or duplicate name, a duplicate user, or a quota
        or borrowing limit outside 0…``MAX_QUOTA_GPUS``; nothing is written then.
        """
        from django.contrib.auth import get_user_model

        validate_name(name, "tenant")
        for label, value in (("quota", quota_gpus), ("borrowing limit", borrow_limit)):
            if value is not None and not 0 <= value <= MAX_QUOTA_GPUS:
                raise ValueError(f"{label} must be 0 to {MAX_QUOTA_GPUS:,} GPUs, got {value}")
        username = username or f"{name}-owner"
        user_model = get_user_model()
        if cls.objects.filter(name=name).exists():
            raise ValueError(f"a tenant named {name!r} already exists")
        if user_model.objects.filter(username=username).exists():
            raise ValueError(f"a user named {username!r} already exists")
        try:
            with transaction.atomic():
                tenant = cls.objects.create(name=name)
                Quota.objects.create(tenant=tenant, guaranteed_gpus=quota_gpus, borrow_limit=borrow_limit)
                user = user_model.objects.create_user(username=username)
                Membership.objects.create(user=user, tenant=tenant, role=Membership.Role.OWNER)
                _, token = ApiToken.issue(user)
        except IntegrityError:
            raise ValueError(f"tenant {name!r} or user {username!r} was created concurrently") from None
        return tenant, token

    def guaranteed_gpus(self) -> int:
        """Sum of the tenant's guaranteed GPUs over its quotas (GPUs)."""
        return self.quotas.aggregate(n=Sum("guaranteed_gpus"))["n"] or 0

    def gpus_in_use(self) -> int:
        """GPUs held by the tenant's running jobs (a job's gang counts in full)."""
        return self.jobs.filter(status=Job.Status.RUNNING).aggregate(n=Sum("gpus"))["n"] or 0

    def job_counts(self) -> dict[str, int]:
        """Number of the tenant's jobs in each status, every status present (0 if none)."""
        counts = dict.fromkeys(Job.Status.values, 0)
        for row in self.jobs.values("status").annotate(n=models.Count("id")):
            counts[row["status"]] = row["n"]
        return counts


class Membership(models.Model):
    """A user's membership of one tenant; a user belongs to at most one tenant."""

    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant} ({self.role})"


class Quota(models.Model):
    """GPUs guaranteed to a tenant, optionally for one GPU type only.

    ``borrow_limit``: how many GPUs beyond the guarantee the tenant may borrow when idle
    (``None``: no limit; 0: no borrowing). ``gpu_type`` empty: any type.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="quotas")
    guaranteed_gpus = models.IntegerField(validators=[MinValueValidator(0)])
    borrow_limit = models.IntegerField(null=True, blank=True, validators=[MinValueValidator(0)])
    gpu_type = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(guaranteed_gpus__gte=0), name="quota_guaranteed_non_negative"),
            models.CheckConstraint(
                condition=Q(borrow_limit__isnull=True) | Q(borrow_limit__gte=0),
                name="quota_borrow_non_negative",
            ),
            models.UniqueConstraint(fields=["tenant", "gpu_type"], name="quota_one_per_tenant_and_type"),
        ]

    def __str__(self) -> str:
        kind = self.gpu_type or "any"
        return f"{self.tenant}: {self.guaranteed_gpus} {kind} GPUs"


class Node(models.Model):
    """A GPU server running a Sharewise agent, authenticated by a token of which we keep the hash."""

    class Status(models.TextChoices):
        READY = "ready"
        UNHEALTHY = "unhealthy"
        DRAINING = "draining"

    class Executor(models.TextChoices):
        """What the node's agent does with a job (declared in its heartbeats, docs/AGENT.md §3)."""

        UNKNOWN = "", "not declared yet"
        EMULATED = "emulated"
        SUBPROCESS = "subprocess"

    name = models.CharField(max_length=64, unique=True, validators=[name_validator])
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.READY)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    #: What its agent declared it runs jobs with, last heartbeat (``cluster.runnable``, AGENT.md §3).
    executor = models.CharField(max_length=16, choices=Executor.choices, blank=True, default="")
    #: Its agent's previous report, send to answer (s; 0: not said): ``scheduling.service.silence``
    #: counts the heartbeat timeout on top of the fleet's (docs/AGENT.md §3).
    report_latency_s = models.FloatField(default=0.0)
    agent_token_hash = models.CharField(max_length=64, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def issue_agent_token(self) -> str:
        """Make a new agent token, store its hash (not saved: call ``save()``), return the raw token."""
        raw = new_token()
        self.agent_token_hash = hash_token(raw)
        return raw

    def check_agent_token(self, raw: str) -> bool:
        """Whether ``raw`` is this node's agent token (constant-time comparison)."""
        return secrets.compare_digest(self.agent_token_hash, hash_token(raw))

    @classmethod
    def register(cls, name: str, gpus: int, memory_mb: int, gpu_type: str) -> tuple[Node, str]:
        """Create node ``name`` with ``gpus`` healthy GPUs of ``memory_mb`` MB; return it and its token.

        Raises ``ValueError`` for a bad name, a duplicate name, or non-positive counts.
        """
        if not 1 <= gpus <= MAX_GPUS_PER_NODE:
            raise ValueError(f"a node has 1 to {MAX_GPUS_PER_NODE} GPUs, got {gpus}")
        if memory_mb < 1 or memory_mb > MAX_GPU_MEMORY_MB:
            raise ValueError(f"GPU memory must be 1 to {MAX_GPU_MEMORY_MB} MB, got {memory_mb}")
        if not gpu_type or len(gpu_type) > 32:
            raise ValueError("GPU type must be 1 to 32 characters")
        validate_name(name, "node")
        node = cls(name=name)
        token = node.issue_agent_token()
        try:
            with transaction.atomic():
                node.save()
                GPU.objects.bulk_create(
                    GPU(
                        node=node, index=i, uuid=f"GPU-{uuid.uuid4()}", gpu_type=gpu_type, memory_mb=memory_mb
                    )
                    for i in range(gpus)
                )
        except IntegrityError:
            raise ValueError(f"a node named {name!r} already exists") from None
        return node, token


class GPUQuerySet(models.QuerySet):
    """Queries over GPUs."""

    def schedulable(self) -> GPUQuerySet:
        """Healthy GPUs on nodes that are not unhealthy."""
        return self.filter(healthy=True).exclude(node__status=Node.Status.UNHEALTHY)


class GPU(models.Model):
    """One physical GPU of a node: its index on the node, NVML UUID, type and memory (MB)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=64, unique=True)
    gpu_type = models.CharField(max_length=32, default="v100")
    memory_mb = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    healthy = models.BooleanField(default=True)

    objects = GPUQuerySet.as_manager()

    class Meta:
        ordering = ["node__name", "index"]
        verbose_name = "GPU"
        constraints = [
            models.UniqueConstraint(fields=["node", "index"], name="gpu_unique_index_per_node"),
            models.CheckConstraint(condition=Q(memory_mb__gte=1), name="gpu_memory_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.node.name}/{self.index}"


def largest_gang() -> int:
    """The largest gang the cluster can hold: its schedulable GPUs (GPUs, 0 when none are registered).

    Same rows as ``GPU.objects.schedulable().count()``, in plain SQL: every job submission asks,
    and the ORM's query compilation costs several times the query itself.
    """
    sql = (
        f"SELECT COUNT(*) FROM {GPU._meta.db_table} g JOIN {Node._meta.db_table} n ON n.id = g.node_id "
        "WHERE g.healthy AND n.status <> %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [Node.Status.UNHEALTHY])
        return cursor.fetchone()[0]


def gpu_types_registered() -> list[str]:
    """The GPU types of the registered GPUs, sorted (what a job's ``gpu_types`` may name)."""
    return sorted(set(GPU.objects.order_by().values_list("gpu_type", flat=True).distinct()))


def largest_gpu_memory_mb_of(gpu_types: list[str]) -> int:
    """Memory (MB) of the largest schedulable GPU of ``gpu_types`` (empty: any type); 0 if none."""
    gpus = GPU.objects.schedulable()
    if gpu_types:
        gpus = gpus.filter(gpu_type__in=gpu_types)
    return gpus.aggregate(m=Max("memory_mb"))["m"] or 0


def largest_gpu_memory_mb() -> int:
    """Memory of the largest schedulable GPU (healthy, on a node that is not unhealthy), MB; 0 when
    there is none. A job whose memory per GPU at its smallest sub-batch exceeds it can never run."""
    return largest_gpu_memory_mb_of([])


class IdempotencyConflict(Exception):
    """An Idempotency-Key was reused with a different request body (the API answers 422)."""


def request_digest(fields: dict[str, Any]) -> str:
    """SHA-256 of a submission's validated fields in canonical JSON (key order does not matter)."""
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()


class Job(models.Model):
    """A training job: a gang of ``gpus`` GPUs training ``model`` at global batch ``batch_size``.

    ``iteration_time_s``: measured exclusive time per iteration at the full batch (s), when known
    (a replayed trace keeps its speed); otherwise the scheduler takes it from the profile.
    """

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE_STATUSES = (Status.PENDING, Status.RUNNING)

    #: No index of its own: ``job_tenant_status_submitted`` leads with the tenant (lookups, cascade).
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="jobs", db_index=False)
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    name = models.CharField(max_length=64, validators=[name_validator])
    model = models.CharField(max_length=64)
    batch_size = models.PositiveIntegerField()
    iterations = models.PositiveIntegerField()
    gpus = models.PositiveIntegerField()
    gpu_memory_mb = models.PositiveIntegerField(null=True, blank=True)
    iteration_time_s = models.FloatField(null=True, blank=True)
    command = models.TextField(blank=True, default="", max_length=MAX_COMMAND_LENGTH)
    priority = models.SmallIntegerField(default=0)
    #: Indexed by ``job_status`` in ``Meta.indexes``, not ``db_index``: on PostgreSQL ``db_index``
    #: adds a ``varchar_pattern_ops`` copy for ``LIKE``, which no query on a status makes.
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    iterations_done = models.FloatField(default=0.0)
    #: GPU-seconds of service (GPUs × wall s held) of the job's runs that have ended with the job
    #: back in the queue (preempted by a round, requeued by an agent event or the heartbeat
    #: timeout); the current run's service is added by the snapshot (``load_state``) and, when
    #: the run ends that way, written here in the same transaction (Tiresias' 2D-LAS key).
    attained_gpu_s = models.FloatField(default=0.0)
    #: The latest iteration time an agent measured (s, includes the co-location slowdown ξ).
    measured_iteration_time_s = models.FloatField(null=True, blank=True)
    #: ``never``: it never shares a GPU (incoming or resident); the tenant's ``default_sharing`` if unset.
    sharing = models.CharField(max_length=8, choices=Sharing.choices, default=Sharing.ALLOWED)
    #: GPU types the job accepts, e.g. ``["a100"]`` (empty: any type; scheduling.core.gpu_types).
    gpu_types = models.JSONField(default=list, blank=True)
    #: Peak memory per GPU an agent measured, brought to the full batch (MB); makes the job's
    #: memory known to the scheduler (docs/LEARNING.md, "In the service").
    measured_memory_mb = models.FloatField(null=True, blank=True)
    #: Requeues after running out of memory beside another job (at most ``SHAREWISE_OOM_RETRIES``).
    oom_retries = models.PositiveSmallIntegerField(default=0)
    failure_reason = models.TextField(blank=True, default="")
    submitted_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)
    idempotency_key = models.CharField(max_length=128, null=True, blank=True)
    request_digest = models.CharField(max_length=64, blank=True, default="", editable=False)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="job_unique_idempotency_key_per_tenant",
            ),
            models.CheckConstraint(condition=Q(gpus__gte=1), name="job_gpus_positive"),
            models.CheckConstraint(condition=Q(batch_size__gte=1), name="job_batch_size_positive"),
            models.CheckConstraint(condition=Q(iterations__gte=1), name="job_iterations_positive"),
            models.CheckConstraint(
                condition=Q(iterations_done__gte=0), name="job_iterations_done_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(attained_gpu_s__gte=0), name="job_attained_gpu_s_non_negative"
            ),
            models.CheckConstraint(
                condition=Q(iteration_time_s__isnull=True) | Q(iteration_time_s__gt=0),
                name="job_iteration_time_positive",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "running", "succeeded", "failed", "cancelled"]),
                name="job_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["tenant", "status", "submitted_at"], name="job_tenant_status_submitted"),
            models.Index(fields=["status"], name="job_status"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}/{self.name} #{self.pk}"

    @classmethod
    def submit(
        cls, tenant: Tenant, submitter: Any, fields: dict[str, Any], idempotency_key: str | None = None
    ) -> tuple[Job, bool]:
        """Create a pending job of ``tenant`` from validated ``fields``; return it and whether it is new.

        With an ``idempotency_key``, a second submission with the same key and the same fields
        returns the first job (``created`` False), also when both race: the database's unique
        (tenant, key) constraint lets one insert win and the loser reads the winner's row.
        Raises :class:`IdempotencyConflict` when the key was used with other fields. The job and
        its ``submitted`` event are written in one transaction (one statement on PostgreSQL,
        :mod:`cluster.job_insert`). Without a ``sharing`` field the job
        takes the tenant's ``default_sharing``.
        """
        digest = request_digest(fields)
        earlier = cls.earlier_submission(tenant, idempotency_key)
        if earlier is not None:
            return earlier.replay(digest), False
        # resolved after the digest: a retry is the same request even if the default changed since
        fields = {"sharing": tenant.default_sharing, **fields}
        try:
            from cluster import job_insert  # imported late: it imports this module

            if job_insert.supported():  # one statement, not BEGIN + 2 INSERTs + COMMIT
                job = cls(
                    tenant=tenant,
                    submitter=submitter,
                    idempotency_key=idempotency_key,
                    request_digest=digest,
                    **fields,
                )
                event = JobEvent(job=job, kind=JobEvent.Kind.SUBMITTED, at=job.submitted_at)
                job_insert.insert_submitted(job, event)
                return job, True
            with transaction.atomic():
                job = cls.objects.create(
                    tenant=tenant,
                    submitter=submitter,
                    idempotency_key=idempotency_key,
                    request_digest=digest,
                    **fields,
                )
                JobEvent.objects.create(job=job, kind=JobEvent.Kind.SUBMITTED, at=job.submitted_at)
        except IntegrityError:
            # Lost a race with a concurrent submission of the same key: answer with the winner.
            winner = cls.earlier_submission(tenant, idempotency_key)
            if winner is None:
                raise
            return winner.replay(digest), False
        return job, True

    @classmethod
    def earlier_submission(cls, tenant: Tenant, idempotency_key: str | None) -> Job | None:
        """The tenant's job submitted with ``idempotency_key``, or ``None`` (always for no key)."""
        if idempotency_key is None:
            return None
        return cls.objects.filter(tenant=tenant, idempotency_key=idempotency_key).first()

    def replay(self, digest: str) -> Job:
        """This job, as the answer to a repeated submission with fields of ``digest``.

        Raises :class:`IdempotencyConflict` when ``digest`` differs from the original request's.
        """
        if digest != self.request_digest:
            raise IdempotencyConflict(
                f"Idempotency-Key already used for job {self.pk} with a different request body"
            )
        return self

    def cancel(self, by: str = "") -> bool:
        """Cancel the job if it is pending or running; return whether this call cancelled it.

        A conditional UPDATE (``status IN (pending, running)``) decides, so two concurrent
        cancels, or a cancel racing a finish, change the row once. Active placements end and a
        ``cancelled`` event is appended in the same transaction.
        """
        now = timezone.now()
        with transaction.atomic():
            changed = Job.objects.filter(pk=self.pk, status__in=self.ACTIVE_STATUSES).update(
                status=self.Status.CANCELLED, finished_at=now
            )
            if changed != 1:
                self.refresh_from_db(fields=["status", "finished_at"])
                return False
            self.placements.filter(active=True).update(active=False, ended_at=run_end(now))
            JobEvent.objects.create(job=self, kind=JobEvent.Kind.CANCELLED, at=now, message=by)
        self.status, self.finished_at = self.Status.CANCELLED, now
        return True

    def current_placement(self) -> list[Placement]:
        """Active placements (one per GPU of the gang), ordered by node and GPU index."""
        cached = getattr(self, "active_placements", None)
        if cached is not None:
            return cached
        return list(
            self.placements.filter(active=True)
            .select_related("gpu__node")
            .order_by("gpu__node__name", "gpu__index")
        )


class Placement(models.Model):
    """One GPU of a running job's gang, from one scheduling round (``generation``).

    ``slot`` (0 or 1) numbers the at most two jobs sharing a GPU; ``sub_batch`` is the micro-batch
    the job runs with (``batch_size // sub_batch`` accumulation steps, MODEL.md §2).
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="placements")
    gpu = models.ForeignKey(GPU, on_delete=models.PROTECT, related_name="placements")
    generation = models.PositiveIntegerField()
    sub_batch = models.PositiveIntegerField()
    slot = models.PositiveSmallIntegerField(default=0)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    #: The job sharing this GPU when this row's ``generation`` was sent (``None``: alone), the
    #: slowdown ξ the scheduler predicted for this job beside it, and the ξ measured since.
    shared_with = models.BigIntegerField(null=True, blank=True)
    predicted_slowdown = models.FloatField(null=True, blank=True)
    measured_slowdown = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(slot__in=[0, 1]), name="placement_slot_0_or_1"),
            models.CheckConstraint(condition=Q(sub_batch__gte=1), name="placement_sub_batch_positive"),
            models.UniqueConstraint(
                fields=["gpu", "slot"], condition=Q(active=True), name="placement_gpu_at_most_two_active"
            ),
            models.UniqueConstraint(
                fields=["job", "gpu"], condition=Q(active=True), name="placement_job_once_per_gpu"
            ),
        ]
        # the windows of the dashboard and of usage ("held a GPU during [start, now]": ended after
        # start, or still active) read only the recent rows of an ever-growing history
        indexes = [models.Index(fields=["ended_at"], name="placement_ended_at")]

    def __str__(self) -> str:
        return f"job {self.job_id} on {self.gpu} (gen {self.generation}, slot {self.slot})"


class JobEventQuerySet(models.QuerySet):
    """Append-only: bulk updates and deletes are refused."""

    def update(self, **kwargs: object) -> int:
        raise TypeError("job events are append-only")


class JobEvent(models.Model):
    """One entry of a job's append-only history (submitted, started, progress, finished, ...)."""

    class Kind(models.TextChoices):
        SUBMITTED = "submitted"
        PLACED = "placed"
        STARTED = "started"
        PROGRESS = "progress"
        PREEMPTED = "preempted"
        REQUEUED = "requeued"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    at = models.DateTimeField(default=timezone.now, db_index=True)
    message = models.TextField(blank=True, default="")
    data = models.JSONField(default=dict, blank=True)

    objects = JobEventQuerySet.as_manager()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.kind} at {self.at:%Y-%m-%d %H:%M:%S}"

    def save(self, *args: object, **kwargs: object) -> None:
        """Insert only; saving an existing event raises ``TypeError`` (the history is append-only)."""
        if self.pk is not None:
            raise TypeError("job events are append-only")
        super().save(*args, **kwargs)


# Job logs are models of this app kept in their own module; imported here so Django registers them.
from cluster.joblog_models import JobLogChunk as JobLogChunk  # noqa: E402
from cluster.joblog_models import JobLogRun as JobLogRun  # noqa: E402
