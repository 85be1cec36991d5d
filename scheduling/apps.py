"""Django app config so the scheduling package's management commands and tasks are found."""

from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """The ``scheduling`` app: service glue around the pure core (``scheduling.core``)."""

    name = "scheduling"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        """Connect the per-process memory of the learned classes to the changes of their rows."""
        from scheduling.service import knowledge

        knowledge.connect()
