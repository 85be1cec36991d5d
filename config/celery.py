"""The Celery application; tasks live in ``scheduling.tasks`` and are found by autodiscovery.

Every ``CELERY_*`` setting is read from Django settings (see ``config/settings.py``).
"""

import os
from typing import Any

from celery import Celery

from config.startup import load_settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("sharewise")


@app.on_configure.connect
def _settings_first(**_: Any) -> None:
    """Celery reads its configuration: load Django's settings first, so a bad setting is one
    line and exit status 2 (config/startup.py), not the traceback of the first option read."""
    load_settings_or_exit()


app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
