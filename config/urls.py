"""Top-level URLs: admin, REST API v1, OpenAPI schema and docs, dashboard (``/`` redirects to it),
health checks and ``/metrics`` (Prometheus)."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from cluster import docs
from cluster import views as cluster_views

# Django's own 404 (a path no pattern takes): JSON under /api/, the HTML page elsewhere.
handler404 = "cluster.views.not_found"
# Django's own 400 (a host ALLOWED_HOSTS does not admit): JSON naming the host under /api/.
handler400 = "cluster.views.bad_request"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("cluster.urls")),
    path("api/schema/", docs.SchemaView.as_view(), name="schema"),
    path("api/docs/", docs.DocsView.as_view(url_name="schema"), name="api-docs"),
    path("dashboard/", include("frontend.urls")),
    path("healthz", cluster_views.healthz, name="healthz"),
    path("readyz", cluster_views.readyz, name="readyz"),
    path("", RedirectView.as_view(url="/dashboard/", permanent=False), name="home"),
    path("", include("scheduling.urls")),
]
