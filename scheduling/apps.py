"""Django app config so the scheduling package's management commands and tasks are found."""

from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """The ``scheduling`` app: service glue around the pure core (``scheduling.core``)."""

    name = "scheduling"
    verbose_name = "Scheduling"
