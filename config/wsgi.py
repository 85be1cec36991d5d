"""WSGI entry point (gunicorn ``config.wsgi``)."""

import os

from django.core.wsgi import get_wsgi_application

from config.startup import load_settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
load_settings_or_exit()  # a bad setting: one line and exit status 2, not a traceback

application = get_wsgi_application()
