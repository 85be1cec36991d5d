"""Django admin: scheduling rounds (read-only: they are the record of what the scheduler did),
leases, and what the scheduler learned (read-only summaries; an incompatible pair or a learned
summary may be deleted, so a wrong mark or a stale estimate is forgotten)."""

from django.contrib import admin
from django.http import HttpRequest

from scheduling.models import (
    IncompatiblePair,
    JobIterTime,
    LearnedIterTime,
    LearnedSlowdown,
    Round,
    SchedulerLease,
    SlowdownObservation,
)


@admin.register(Round)
class RoundAdmin(admin.ModelAdmin):
    list_display = ["id", "started_at", "policy", "duration_ms", "n_started", "n_waiting", "n_preempted"]
    list_filter = ["policy"]
    date_hierarchy = "started_at"
    readonly_fields = [
        "started_at",
        "finished_at",
        "policy",
        "duration_ms",
        "phases_ms",
        "n_started",
        "n_waiting",
        "n_preempted",
        "decisions",
        "waits",
        "digest",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Round | None = None) -> bool:
        return False


@admin.register(SchedulerLease)
class SchedulerLeaseAdmin(admin.ModelAdmin):
    list_display = ["name", "holder", "expires_at"]


class LearnedAdmin(admin.ModelAdmin):
    """Learned rows: seen and deleted, never edited by hand (the agents' reports write them)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(LearnedSlowdown)
class LearnedSlowdownAdmin(LearnedAdmin):
    list_display = ["model_a", "sub_a", "model_b", "sub_b", "count", "mean_log", "var_log", "updated_at"]
    search_fields = ["model_a", "model_b"]


@admin.register(LearnedIterTime)
class LearnedIterTimeAdmin(LearnedAdmin):
    list_display = ["model", "batch_size", "gpus", "count", "mean_log", "var_log", "memory_mb", "updated_at"]
    search_fields = ["model"]


@admin.register(JobIterTime)
class JobIterTimeAdmin(LearnedAdmin):
    list_display = ["job", "count", "mean_log", "var_log", "updated_at"]
    raw_id_fields = ["job"]


@admin.register(IncompatiblePair)
class IncompatiblePairAdmin(LearnedAdmin):
    list_display = ["model_a", "sub_a", "model_b", "sub_b", "job", "partner", "created_at"]
    search_fields = ["model_a", "model_b", "reason"]


@admin.register(SlowdownObservation)
class SlowdownObservationAdmin(LearnedAdmin):
    list_display = ["at", "job", "partner", "model_a", "sub_a", "model_b", "sub_b", "predicted", "measured"]
    date_hierarchy = "at"
