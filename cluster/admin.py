"""Django admin: list views and filters for tenants, quotas, nodes, GPUs, jobs and their history."""

from django.contrib import admin

from cluster.models import GPU, Job, JobEvent, Membership, Node, Placement, Quota, Tenant


class QuotaInline(admin.TabularInline):
    model = Quota
    extra = 0


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ["name", "guaranteed_gpus", "gpus_in_use", "default_sharing", "created_at"]
    search_fields = ["name"]
    inlines = [QuotaInline, MembershipInline]


@admin.register(Quota)
class QuotaAdmin(admin.ModelAdmin):
    list_display = ["tenant", "guaranteed_gpus", "borrow_limit", "gpu_type"]
    list_filter = ["gpu_type"]
    search_fields = ["tenant__name"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", "tenant"]
    search_fields = ["user__username", "tenant__name"]
    raw_id_fields = ["user"]


class GPUInline(admin.TabularInline):
    model = GPU
    extra = 0
    fields = ["index", "uuid", "gpu_type", "memory_mb", "healthy"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "status", "last_heartbeat", "created_at"]
    list_filter = ["status"]
    search_fields = ["name"]
    readonly_fields = ["last_heartbeat", "created_at"]
    inlines = [GPUInline]


@admin.register(GPU)
class GPUAdmin(admin.ModelAdmin):
    list_display = ["__str__", "uuid", "gpu_type", "memory_mb", "healthy"]
    list_filter = ["healthy", "gpu_type", "node"]
    search_fields = ["uuid", "node__name"]
    list_select_related = ["node"]


class PlacementInline(admin.TabularInline):
    model = Placement
    extra = 0
    fields = [
        "gpu",
        "slot",
        "sub_batch",
        "generation",
        "active",
        "created_at",
        "ended_at",
        "shared_with",
        "predicted_slowdown",
        "measured_slowdown",
    ]
    readonly_fields = fields
    can_delete = False


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    fields = ["at", "kind", "message", "data"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ANN001 - Django's signature
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "tenant",
        "name",
        "model",
        "gpus",
        "batch_size",
        "status",
        "iterations_done",
        "iterations",
        "priority",
        "sharing",
        "submitted_at",
    ]
    list_filter = ["status", "tenant", "model", "sharing"]
    search_fields = ["name", "model", "tenant__name"]
    date_hierarchy = "submitted_at"
    list_select_related = ["tenant"]
    readonly_fields = ["submitted_at", "started_at", "finished_at", "idempotency_key", "request_digest"]
    raw_id_fields = ["submitter"]
    inlines = [PlacementInline, JobEventInline]

    def get_readonly_fields(self, request, obj=None) -> list[str]:  # noqa: ANN001 - Django's signature
        """A saved job's tenant too: a job never moves between tenants (its quota charge, its
        idempotency key and the web processes' memory of it, ``cluster.job_tenants``, are the
        tenant's)."""
        fields = list(super().get_readonly_fields(request, obj))
        return fields if obj is None else [*fields, "tenant"]


@admin.register(Placement)
class PlacementAdmin(admin.ModelAdmin):
    list_display = ["job", "gpu", "slot", "sub_batch", "generation", "active", "created_at"]
    list_filter = ["active"]
    list_select_related = ["job__tenant", "gpu__node"]
    raw_id_fields = ["job", "gpu"]


@admin.register(JobEvent)
class JobEventAdmin(admin.ModelAdmin):
    list_display = ["job", "kind", "at", "message"]
    list_filter = ["kind"]
    search_fields = ["message"]
    list_select_related = ["job__tenant"]
    raw_id_fields = ["job"]

    def has_change_permission(self, request, obj=None) -> bool:  # noqa: ANN001 - Django's signature
        return False
