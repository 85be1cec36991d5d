"""URLs of the REST API, mounted at ``/api/v1/``.

Any other path ending in ``/`` under it (an id that is not a number, a number over 18 digits, a
newline, a typo) answers the API's JSON 404 ``{"error": "not found"}``, not Django's HTML page; a
path without the slash still gets ``APPEND_SLASH``'s redirect first, and whatever else Django
itself finds nowhere under ``/api/`` gets the same JSON (``config.urls.handler404``).
"""

from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from cluster import (
    agent_batch,
    bulk_submit,
    exceptions,
    fast_submit,
    job_views,
    order_views,
    usage_views,
    views,
)

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("jobs", views.JobViewSet, basename="job")
router.register("admin/tenants", views.AdminTenantViewSet, basename="admin-tenant")
router.register("admin/quotas", views.AdminQuotaViewSet, basename="admin-quota")
router.register("admin/nodes", views.AdminNodeViewSet, basename="admin-node")
router.register("admin/gpus", views.AdminGPUViewSet, basename="admin-gpu")

#: The router's list/create view of jobs, behind the plain submission view (cluster/fast_submit.py).
job_list = next(p for p in router.urls if p.name == "job-list")

urlpatterns = [
    path("jobs/", fast_submit.list_or_submit(job_list.callback), name="job-list"),
    path("jobs/bulk/", bulk_submit.JobBulkView.as_view(), name="job-bulk"),
    path("tenant/", views.TenantView.as_view(), name="tenant"),
    path("tenant/token/", views.TenantTokenView.as_view(), name="tenant-token"),
    path("admin/usage/", usage_views.AdminUsageView.as_view(), name="admin-usage"),
    path("admin/slowdowns/", views.AdminSlowdownView.as_view(), name="admin-slowdowns"),
    path("admin/incompatible-pairs/", views.AdminIncompatiblePairView.as_view(), name="admin-incompatible"),
    path("agent/heartbeat/", views.AgentHeartbeatView.as_view(), name="agent-heartbeat"),
    path("agent/orders/", order_views.AgentOrdersView.as_view(), name="agent-orders"),
    path("agent/batch/", agent_batch.AgentBatchView.as_view(), name="agent-batch"),
    re_path(
        rf"^agent/jobs/(?P<job_id>{views.ID_PATTERN})/events/$",
        views.AgentJobEventView.as_view(),
        name="agent-job-events",
    ),
    re_path(
        rf"^agent/jobs/(?P<job_id>{views.ID_PATTERN})/logs/$",
        job_views.AgentJobLogView.as_view(),
        name="agent-job-logs",
    ),
    re_path(
        rf"^jobs/(?P<job_id>{views.ID_PATTERN})/events/$",
        job_views.JobEventsView.as_view(),
        name="job-events",
    ),
    re_path(
        rf"^jobs/(?P<job_id>{views.ID_PATTERN})/logs/$", job_views.JobLogsView.as_view(), name="job-logs"
    ),
    *router.urls,
    # last: only what nothing else took; [\s\S], not ".", so that a newline (%0A) matches too
    re_path(r"^[\s\S]*/$", exceptions.api_not_found, name="api-not-found"),
]
