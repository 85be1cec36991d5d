"""Django app config so ``manage.py demo`` (``demo/management/commands/demo.py``) is found."""

from django.apps import AppConfig


class DemoAppConfig(AppConfig):
    """The ``demo`` app: the live demo, a driver of the service like Celery and ``run_scheduler``."""

    name = "demo"
    verbose_name = "Live demo"
