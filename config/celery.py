"""The Celery application; tasks live in ``scheduling.tasks`` and are found by autodiscovery.

Every ``CELERY_*`` setting is read from Django settings (see ``config/settings.py``).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("sharewise")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
