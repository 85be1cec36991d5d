"""Request and response shapes of the REST API, with explicit types and bounds.

Numbers must be JSON numbers and strings JSON strings (no coercion of ``"4"`` to 4); fields a
client may not write (``status``, ``tenant``, ...) and unknown fields are rejected by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agent.messages import MessageError, split_command
from cluster import cluster_facts, models, runnable, usage_serializers
from cluster.fields import (
    PositiveFloatField,
    RejectUnknownFieldsMixin,
    StrictBooleanField,
    StrictCharField,
    StrictIntegerField,
    StrictPrimaryKeyRelatedField,
)
from cluster.models import GPU, Job, Node, Placement, Quota, Sharing, Tenant
from common.shapes import MAX_GPUS_PER_NODE, MAX_TOTAL_GPUS
from scheduling import service
from scheduling.core.learning import ITER_TIME_SOURCES, Estimate
from scheduling.models import IncompatiblePair, LearnedSlowdown


class PlacementSerializer(serializers.ModelSerializer):
    """One GPU of a running job: node, index on the node, UUID, slot, sub-batch, generation;
    whether another job shares the GPU, and then the slowdown ξ the scheduler predicted for this
    job beside it and the ξ measured since (``null`` until the agent reported), and which job it is
    (``partner``: ``job ID NAME``, ``another tenant's job``, or null when alone)."""

    node = serializers.CharField(source="gpu.node.name", read_only=True)
    gpu_index = serializers.IntegerField(source="gpu.index", read_only=True)
    gpu_uuid = serializers.CharField(source="gpu.uuid", read_only=True)
    shared = serializers.SerializerMethodField()
    partner = serializers.SerializerMethodField()

    class Meta:
        model = Placement
        fields = [
            "node",
            "gpu_index",
            "gpu_uuid",
            "slot",
            "sub_batch",
            "generation",
            "shared",
            "predicted_slowdown",
            "measured_slowdown",
            "partner",
        ]
        read_only_fields = fields

    def get_shared(self, placement: Placement) -> bool:
        return placement.shared_with is not None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_partner(self, placement: Placement) -> str | None:
        """Set by the view (:func:`cluster.job_details.describe_jobs`); null when alone."""
        return getattr(placement, "partner", None)


def shallow_copy(field: serializers.Field) -> serializers.Field:
    """``copy.copy(field)`` without the pickle protocol's detour (``__reduce_ex__``): a new
    instance of the same class with the same attributes, ``__init__`` not run again."""
    twin = object.__new__(type(field))
    twin.__dict__.update(field.__dict__)
    return twin


def largest(values: list[float | None]) -> float | None:
    """The largest of the non-null ``values`` (``None`` when there is none)."""
    present = [v for v in values if v is not None]
    return max(present) if present else None


class JobSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """A job as a tenant submits it (writable fields) and sees it (plus status and placement).

    A plain ``Serializer`` with every field declared: submission is the hot path, and this
    skips ModelSerializer's per-request model introspection. Jobs are created by
    :meth:`cluster.models.Job.submit`, never by ``save()``.

    Bounds: ``gpus`` 1…healthy GPUs registered (the largest gang the cluster can hold);
    ``batch_size`` 1…2^20 samples; ``iterations`` 1…10^8; ``gpu_memory_mb`` 1…2^20 MB;
    ``iteration_time_s`` in (0, 86400] s; ``priority`` −100…100; ``command`` ≤ 4096 characters.
    """

    id = serializers.IntegerField(read_only=True)
    name = StrictCharField(
        max_length=64,
        validators=[models.name_validator],
        help_text="1-64 lowercase letters, digits and inner hyphens.",
    )
    model = StrictCharField(
        max_length=64,
        validators=[
            models.RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", "letters, digits, '.', '_', '-'")
        ],
        help_text="Model name, e.g. resnet50 (matched against the profiles).",
    )
    batch_size = StrictIntegerField(
        min_value=1, max_value=models.MAX_BATCH_SIZE, help_text="Global batch (samples)."
    )
    iterations = StrictIntegerField(
        min_value=1, max_value=models.MAX_ITERATIONS, help_text="Training iterations."
    )
    gpus = StrictIntegerField(
        min_value=1,
        max_value=MAX_TOTAL_GPUS,
        help_text="GPUs of the gang (at most the cluster's healthy GPUs).",
    )
    gpu_memory_mb = StrictIntegerField(
        min_value=1,
        max_value=models.MAX_GPU_MEMORY_MB,
        required=False,
        allow_null=True,
        help_text="Memory per GPU at the full batch (MB); default from the profile.",
    )
    iteration_time_s = PositiveFloatField(
        max_value=models.MAX_ITERATION_TIME_S,
        required=False,
        allow_null=True,
        help_text="Measured exclusive time per iteration at the full batch (s, > 0).",
    )
    command = StrictCharField(max_length=models.MAX_COMMAND_LENGTH, required=False, allow_blank=True)
    priority = StrictIntegerField(min_value=-100, max_value=100, required=False)
    sharing = serializers.ChoiceField(
        choices=Sharing.choices,
        required=False,
        help_text="allowed (default: the tenant's default_sharing) or never: the job never shares a GPU.",
    )
    gpu_types = serializers.ListField(
        child=StrictCharField(max_length=32),
        required=False,
        max_length=16,
        help_text='GPU types the job accepts, e.g. ["a100"]; empty or absent: any type. Each must be '
        "a type of the cluster's GPUs.",
    )
    status = serializers.ChoiceField(choices=Job.Status.choices, read_only=True)
    iterations_done = serializers.FloatField(read_only=True, help_text="Iterations completed so far.")
    failure_reason = serializers.CharField(read_only=True)
    submitted_at = serializers.DateTimeField(read_only=True)
    started_at = serializers.DateTimeField(read_only=True, allow_null=True)
    finished_at = serializers.DateTimeField(read_only=True, allow_null=True)
    placement = PlacementSerializer(source="current_placement", many=True, read_only=True)
    scheduler_iteration_time_s = serializers.SerializerMethodField(
        help_text="Exclusive time per iteration at the full batch (s) the scheduler uses now."
    )
    iteration_time_source = serializers.SerializerMethodField(
        help_text="Where it comes from: measured (this job, alone), learned (its class), declared, profile."
    )
    predicted_slowdown = serializers.SerializerMethodField(
        help_text="Running and sharing a GPU: the slowdown ξ predicted for its co-location (null otherwise)."
    )
    measured_slowdown = serializers.SerializerMethodField(
        help_text="Running and sharing a GPU: the ξ measured since (null until measured)."
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        """A shallow copy of each declared field, where DRF deep-copies them: a deep copy runs
        every field's ``__init__`` again (validators, choices, the nested placement serializer),
        most of the serializer's cost on the submission path (issue 16). Each instance still
        binds its own copies (``bind`` sets ``parent`` and ``field_name`` on the copy); what the
        copies share (validators, choices, a list field's ``child``, the nested placement
        serializer) is never changed after construction and reads no context."""
        return {name: shallow_copy(field) for name, field in self._declared_fields.items()}

    def estimate(self, job: Job) -> Estimate:
        """The iteration time the scheduler uses for ``job`` (attached in bulk by the list view)."""
        estimate = getattr(job, "iteration_estimate", None)
        if estimate is None:
            estimate = job.iteration_estimate = service.job_estimates([job])[job.pk]
        return estimate

    def get_scheduler_iteration_time_s(self, job: Job) -> float:
        return self.estimate(job).value

    @extend_schema_field(serializers.ChoiceField(choices=list(ITER_TIME_SOURCES)))
    def get_iteration_time_source(self, job: Job) -> str:
        return self.estimate(job).source

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_predicted_slowdown(self, job: Job) -> float | None:
        return largest([p.predicted_slowdown for p in job.current_placement()])

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_measured_slowdown(self, job: Job) -> float | None:
        return largest([p.measured_slowdown for p in job.current_placement()])

    pending_reason = serializers.SerializerMethodField(
        help_text="Why a pending job waits: the latest round's reason (null unless pending)."
    )
    estimated_start_at = serializers.SerializerMethodField(
        help_text="When a pending job may start if nothing else arrives (null: no estimate)."
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_pending_reason(self, job: Job) -> str | None:
        """Set by the view (:func:`cluster.job_details.describe_jobs`)."""
        return getattr(job, "pending_reason", None)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_estimated_start_at(self, job: Job) -> str | None:
        """Set by the view (:func:`cluster.job_details.describe_jobs`), ISO 8601."""
        moment = getattr(job, "estimated_start_at", None)
        return None if moment is None else serializers.DateTimeField().to_representation(moment)

    def cluster_fact(self, name: str, read: Callable[[], Any]) -> Any:
        """``read()`` once per serializer context: a bulk submission (one context for all its
        jobs) asks the database for the largest gang, the largest GPU and the agents' executors
        once, not once per job. Keyed by ``name``. The context starts with the facts of
        :func:`cluster.cluster_facts.current` (cached a few seconds across requests)."""
        facts = self.context.get("cluster_facts")
        if facts is None:
            facts = self.context["cluster_facts"] = cluster_facts.current()
        if name not in facts:
            facts[name] = read()
        return facts[name]

    def validate_gpus(self, value: int) -> int:
        """Bound the gang by the healthy GPUs registered; none registered is a clear error."""
        largest = self.cluster_fact("largest_gang", models.largest_gang)
        if largest == 0:
            raise serializers.ValidationError(
                "no healthy GPUs are registered yet; an admin must add nodes first"
            )
        if value > largest:
            raise serializers.ValidationError(
                f"at most {largest} GPUs (the healthy GPUs of the cluster), got {value}"
            )
        return value

    def validate_command(self, value: str) -> str:
        """A command must split into arguments as its agent will split it
        (:func:`agent.messages.split_command`); an empty one is left to :meth:`validate`."""
        if value:
            try:
                split_command(value)
            except MessageError as exc:
                raise serializers.ValidationError(str(exc)) from None
        return value

    def validate_gpu_types(self, value: list[str]) -> list[str]:
        """Each type must be one the cluster's GPUs have; duplicates are dropped (first kept)."""
        known = models.gpu_types_registered()
        unknown = [t for t in value if t not in known]
        if unknown:
            have = ", ".join(known) or "none"
            raise serializers.ValidationError(
                f"unknown GPU type {unknown[0]!r}; the cluster's GPU types are: {have}"
            )
        return list(dict.fromkeys(value))

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Refuse a job that can never run: one without a command on a cluster whose agents all
        run real processes (:func:`cluster.runnable.missing_command_refusal`), or one whose memory
        per GPU at its smallest sub-batch (gradient accumulation, MODEL.md §1–2) exceeds the
        largest schedulable GPU's memory (MB) — of the types it accepts (``gpu_types``;
        :func:`memory_refusal`).
        """
        if not attrs.get("command"):
            refusal = self.cluster_fact("missing_command_refusal", runnable.missing_command_refusal)
            if refusal is not None:
                raise serializers.ValidationError({"command": [refusal]})
        types = sorted(attrs.get("gpu_types") or [])
        largest = self.cluster_fact(
            f"largest_gpu_memory_mb:{','.join(types)}", lambda: models.largest_gpu_memory_mb_of(types)
        )
        if largest == 0 and types:
            raise serializers.ValidationError(
                {"gpu_types": [f"no schedulable GPU of type {', '.join(types)} now"]}
            )
        if largest == 0:
            return attrs  # validate_gpus already refuses a submission to a cluster without GPUs
        if types:
            of_types = models.GPU.objects.schedulable().filter(gpu_type__in=types).count()
            if attrs["gpus"] > of_types:
                raise serializers.ValidationError(
                    {
                        "gpus": [
                            f"at most {of_types} GPUs of type {', '.join(types)} (schedulable now), "
                            f"got {attrs['gpus']}"
                        ]
                    }
                )
        refusal = memory_refusal(attrs, largest, types)
        if refusal is not None:
            raise serializers.ValidationError({"gpu_memory_mb": [refusal]})
        return attrs


def memory_refusal(attrs: dict[str, Any], largest_mb: int, types: list[str]) -> str | None:
    """Why a job of validated ``attrs`` can never run for memory, or ``None`` when it fits (or the
    profile cannot model it: the round reports that): its memory per GPU at its smallest
    sub-batch (gradient accumulation, MODEL.md §1–2) exceeds ``largest_mb``, the largest
    schedulable GPU's memory (MB) of the accepted ``types`` (all types when empty).

    Same memory model as a round: ``scheduling.service.load_state`` builds the core job with
    ``memory_mb`` = ``gpu_memory_mb`` (``None``: the profile's), and the placement asks
    ``largest_fitting_sub_batch`` against the largest healthy GPU.
    """
    from scheduling.core import types as core
    from scheduling.core.placement import largest_fitting_sub_batch
    from scheduling.profiles import ProfileError, load_default_profile

    memory = attrs.get("gpu_memory_mb")
    job = core.Job(
        0,
        "",
        attrs["model"],
        attrs["batch_size"],
        attrs["gpus"],
        attrs["iterations"],
        0.0,
        1.0,
        None if memory is None else float(memory),
    )
    profile = load_default_profile()
    min_sub_batch = core.SchedulerConfig().min_sub_batch
    try:
        if largest_fitting_sub_batch(profile, job, largest_mb, min_sub_batch) is not None:
            return None
        smallest = min(profile.sub_batches(job, min_sub_batch))
        needed = profile.memory_mb(job, smallest)
    except ProfileError:
        return None
    given = f"{memory} MB per GPU at the full batch" if memory is not None else "the profile's memory"
    return (
        f"the job can never run: {given} needs {math.ceil(needed)} MB per GPU even at sub-batch "
        f"{smallest}, more than the largest healthy GPU"
        f"{' of type ' + ', '.join(types) if types else ''} ({largest_mb} MB)"
    )


class QuotaSerializer(serializers.ModelSerializer):
    """A tenant's quota: guaranteed GPUs, optional borrowing limit, optional GPU type."""

    class Meta:
        model = Quota
        fields = ["id", "tenant", "guaranteed_gpus", "borrow_limit", "gpu_type"]


class TenantQuotaSerializer(QuotaSerializer):
    """A quota as its own tenant sees it (no tenant id)."""

    class Meta(QuotaSerializer.Meta):
        fields = ["guaranteed_gpus", "borrow_limit", "gpu_type"]


class TenantUsageSerializer(serializers.Serializer):
    """What a tenant uses: GPUs held by running jobs, job counts per status, its standing against
    its quota now (``quota``: over quota, borrowed GPUs, per GPU type), its GPU-hours over the
    windows asked for (``gpu_hours``, ``?windows=2h,24h`` by default) and the cluster-wide
    windowed fairness of the same windows (``fairness``, naming no tenant)."""

    gpus_in_use = serializers.IntegerField()
    guaranteed_gpus = serializers.IntegerField()
    jobs = serializers.DictField(child=serializers.IntegerField())
    quota = usage_serializers.QuotaUseSerializer()
    gpu_hours = usage_serializers.TenantWindowSerializer(many=True)
    fairness = usage_serializers.WindowFairnessSerializer(many=True)


class TenantSerializer(serializers.ModelSerializer):
    """The caller's tenant: name, quotas and current usage."""

    quotas = TenantQuotaSerializer(many=True, read_only=True)
    usage = serializers.SerializerMethodField()

    class Meta:
        model = Tenant
        fields = ["name", "created_at", "default_sharing", "quotas", "usage"]

    @extend_schema_field(TenantUsageSerializer)
    def get_usage(self, tenant: Tenant) -> dict[str, Any]:
        """``context["windows"]``: the windows (s) of ``gpu_hours`` (default: 2 h and 24 h)."""
        windows = service.usage_windows(
            self.context.get("windows", service.DEFAULT_WINDOWS_S), timezone.now(), [tenant.pk]
        )
        return TenantUsageSerializer(
            {
                "gpus_in_use": tenant.gpus_in_use(),
                "guaranteed_gpus": tenant.guaranteed_gpus(),
                "jobs": tenant.job_counts(),
                "quota": usage_serializers.quota_use_data(service.quota_use([tenant.pk])[tenant.pk]),
                "gpu_hours": usage_serializers.windows_data(windows.per_tenant[tenant.pk]),
                "fairness": usage_serializers.fairness_data(windows.fairness, None),
            }
        ).data


class AdminTenantSerializer(RejectUnknownFieldsMixin, serializers.ModelSerializer):
    """A tenant as admins manage it."""

    name = StrictCharField(max_length=64, validators=[models.name_validator])
    default_sharing = serializers.ChoiceField(choices=Sharing.choices, required=False)
    quotas = TenantQuotaSerializer(many=True, read_only=True)
    over_quota = serializers.SerializerMethodField()

    class Meta:
        model = Tenant
        fields = ["id", "name", "created_at", "default_sharing", "quotas", "over_quota"]
        read_only_fields = ["id", "created_at"]

    def get_over_quota(self, tenant: Tenant) -> bool:
        """Whether ``tenant`` uses more than its quota now (:func:`scheduling.service.quota_use`,
        the tenant API's ``usage.quota.over_quota``). Read once for every tenant of the response
        (3 queries), kept in the shared context."""
        use = self.context.get("_quota_use")
        if use is None or tenant.pk not in use:
            root = self.root.instance
            tenants = [root] if isinstance(root, Tenant) or root is None else list(root)
            ids = {t.pk for t in tenants if isinstance(t, Tenant)} | {tenant.pk}
            use = self.context["_quota_use"] = service.quota_use(ids)
        return use[tenant.pk].over_quota

    def validate_name(self, value: str) -> str:
        clash = Tenant.objects.filter(name=value)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError(f"a tenant named {value!r} already exists")
        return value


class AdminQuotaSerializer(RejectUnknownFieldsMixin, serializers.ModelSerializer):
    """A quota as admins manage it (non-negative GPU counts; one quota per tenant and GPU type)."""

    tenant = StrictPrimaryKeyRelatedField(queryset=Tenant.objects.all())
    guaranteed_gpus = StrictIntegerField(min_value=0, max_value=models.MAX_QUOTA_GPUS)
    borrow_limit = StrictIntegerField(
        min_value=0, max_value=models.MAX_QUOTA_GPUS, required=False, allow_null=True
    )
    gpu_type = StrictCharField(max_length=32, required=False, allow_blank=True)

    class Meta:
        model = Quota
        fields = ["id", "tenant", "guaranteed_gpus", "borrow_limit", "gpu_type"]
        validators = []  # the unique (tenant, gpu_type) check is validate()'s, with a clear message

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        tenant = attrs.get("tenant", getattr(self.instance, "tenant", None))
        gpu_type = attrs.get("gpu_type", getattr(self.instance, "gpu_type", ""))
        clash = Quota.objects.filter(tenant=tenant, gpu_type=gpu_type)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError(
                f"tenant {tenant} already has a quota for GPU type {gpu_type or 'any'!r}"
            )
        return attrs


class GPUSerializer(RejectUnknownFieldsMixin, serializers.ModelSerializer):
    """A GPU as admins see it; only ``healthy`` may be changed."""

    node = serializers.CharField(source="node.name", read_only=True)
    healthy = StrictBooleanField(required=False)

    class Meta:
        model = GPU
        fields = ["id", "node", "index", "uuid", "gpu_type", "memory_mb", "healthy"]
        read_only_fields = ["id", "node", "index", "uuid", "gpu_type", "memory_mb"]


class NodeSerializer(RejectUnknownFieldsMixin, serializers.ModelSerializer):
    """A node as admins see it; ``status`` may be changed (e.g. to drain it)."""

    gpus = GPUSerializer(many=True, read_only=True)

    class Meta:
        model = Node
        fields = ["id", "name", "status", "last_heartbeat", "created_at", "gpus"]
        read_only_fields = ["id", "name", "last_heartbeat", "created_at"]


class NodeCreateSerializer(RejectUnknownFieldsMixin, serializers.Serializer):
    """Register a node with identical GPUs; the response carries its agent token, shown once."""

    name = StrictCharField(max_length=64, validators=[models.name_validator])
    gpus = StrictIntegerField(min_value=1, max_value=MAX_GPUS_PER_NODE, write_only=True)
    gpu_memory_mb = StrictIntegerField(min_value=1, max_value=models.MAX_GPU_MEMORY_MB, write_only=True)
    gpu_type = StrictCharField(min_length=1, max_length=32, write_only=True)
    agent_token = serializers.CharField(read_only=True)

    def create(self, validated_data: dict[str, Any]) -> Node:
        try:
            node, token = Node.register(
                validated_data["name"],
                validated_data["gpus"],
                validated_data["gpu_memory_mb"],
                validated_data["gpu_type"],
            )
        except (ValueError, IntegrityError) as exc:
            raise serializers.ValidationError({"name": [str(exc)]}) from None
        node.agent_token = token
        return node

    def to_representation(self, instance: Node) -> dict[str, Any]:
        data = NodeSerializer(instance).data
        data["agent_token"] = getattr(instance, "agent_token", None)
        return data


# ------------------------------------------------------------------ what the scheduler learned


class LearnedSlowdownSerializer(serializers.ModelSerializer):
    """A learned slowdown ξ of ``model_a`` at ``sub_a`` beside ``model_b`` at ``sub_b``: its samples
    (``count``, geometric ``mean``, ``spread`` = standard deviation of ``ln ξ``), the shipped
    profile's prior (``prior``, ``prior_source``: measured, predicted, default) and the posterior
    the scheduler uses (``posterior``; docs/LEARNING.md)."""

    mean = serializers.SerializerMethodField()
    spread = serializers.SerializerMethodField()
    prior = serializers.SerializerMethodField()
    prior_source = serializers.SerializerMethodField()
    posterior = serializers.SerializerMethodField()

    class Meta:
        model = LearnedSlowdown
        fields = [
            "model_a",
            "sub_a",
            "model_b",
            "sub_b",
            "count",
            "mean",
            "spread",
            "prior",
            "prior_source",
            "posterior",
            "updated_at",
        ]
        read_only_fields = fields

    def _view(self, row: LearnedSlowdown) -> service.SlowdownView:
        view = getattr(row, "view", None)
        if view is None:
            view = row.view = service.slowdown_view(row)
        return view

    def get_mean(self, row: LearnedSlowdown) -> float:
        return row.stats.mean

    def get_spread(self, row: LearnedSlowdown) -> float:
        return row.stats.spread

    def get_prior(self, row: LearnedSlowdown) -> float:
        return self._view(row).prior

    @extend_schema_field(serializers.ChoiceField(choices=["measured", "predicted", "default"]))
    def get_prior_source(self, row: LearnedSlowdown) -> str:
        return self._view(row).prior_source

    def get_posterior(self, row: LearnedSlowdown) -> float:
        return self._view(row).posterior


class IncompatiblePairSerializer(serializers.ModelSerializer):
    """Two ``(model, sub-batch)`` sides that ran out of memory together: never co-located again."""

    class Meta:
        model = IncompatiblePair
        fields = ["model_a", "sub_a", "model_b", "sub_b", "job", "partner", "reason", "created_at"]
        read_only_fields = fields
