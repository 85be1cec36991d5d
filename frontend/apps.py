"""Django app config of the dashboard."""

from django.apps import AppConfig


class FrontendConfig(AppConfig):
    """Pages and JSON endpoints of the live dashboard (no models)."""

    name = "frontend"
    verbose_name = "Dashboard"
