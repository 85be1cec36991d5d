"""URLs of the scheduling app: ``/metrics`` for Prometheus (included at the site root)."""

from django.urls import path

from scheduling.service.prometheus import metrics_view

urlpatterns = [
    path("metrics", metrics_view, name="metrics"),
]
