"""Django admin: scheduling rounds (read-only: they are the record of what the scheduler did) and leases."""

from django.contrib import admin
from django.http import HttpRequest

from scheduling.models import Round, SchedulerLease


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
        "digest",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Round | None = None) -> bool:
        return False


@admin.register(SchedulerLease)
class SchedulerLeaseAdmin(admin.ModelAdmin):
    list_display = ["name", "holder", "expires_at"]
