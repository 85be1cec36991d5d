"""ASGI entry point (for an ASGI server; the default deployment uses gunicorn/WSGI)."""

import os

from django.core.asgi import get_asgi_application

from config.startup import load_settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
load_settings_or_exit()  # a bad setting: one line and exit status 2, not a traceback

application = get_asgi_application()
