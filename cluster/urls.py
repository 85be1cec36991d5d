"""URLs of the REST API, mounted at ``/api/v1/``."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from cluster import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("jobs", views.JobViewSet, basename="job")
router.register("admin/tenants", views.AdminTenantViewSet, basename="admin-tenant")
router.register("admin/quotas", views.AdminQuotaViewSet, basename="admin-quota")
router.register("admin/nodes", views.AdminNodeViewSet, basename="admin-node")
router.register("admin/gpus", views.AdminGPUViewSet, basename="admin-gpu")

urlpatterns = [
    path("tenant/", views.TenantView.as_view(), name="tenant"),
    path("agent/heartbeat/", views.AgentHeartbeatView.as_view(), name="agent-heartbeat"),
    path("agent/jobs/<int:job_id>/events/", views.AgentJobEventView.as_view(), name="agent-job-events"),
    *router.urls,
]
