"""A process's start with bad settings: one line, not a traceback.

``config/settings.py`` refuses a bad environment setting with ``ImproperlyConfigured`` (Django's
convention, what tests importing the settings catch). The programs that load the settings —
``manage.py``, gunicorn (``gunicorn.conf.py``'s ``on_starting``, in the master, so a bad setting
stops the server instead of failing each worker), ``config/wsgi.py``, ``config/asgi.py`` and
Celery (``config/celery.py``) — call :func:`load_settings_or_exit` first.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ImproperlyConfigured

#: Exit status of a bad setting: a usage error, as the project's command-line tools exit.
EXIT_BAD_SETTING = 2


def load_settings_or_exit() -> None:
    """Load Django's settings (``DJANGO_SETTINGS_MODULE``, default ``config.settings``) now.
    A refused setting prints ``error: <message>`` on stderr, one line, and raises
    ``SystemExit(2)``."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 (the access loads the settings module)
    except ImproperlyConfigured as exc:
        message = " ".join(str(exc).split())
        print(f"error: {message}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_BAD_SETTING) from None


#: Exit status of a command whose database cannot be used (not reachable, refusing the login).
EXIT_DATABASE = 1


#: The thread Django's auto-reloader runs the command in (``manage.py runserver`` without
#: ``--noreload``: django.utils.autoreload.start_django), in the child process it restarts.
AUTORELOAD_THREAD = "django-main-thread"


def _database_line(exc: BaseException) -> str:
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return f"error: the database (DATABASE_URL) cannot be used: {first}"


@contextmanager
def database_errors_in_one_line() -> Iterator[None]:
    """Run a command; a database that cannot be used (Django's ``OperationalError``: the server
    not reachable, the login refused, SQLite's file not openable) prints ``error: the database
    (DATABASE_URL) cannot be used: <the driver's first line>`` on stderr and raises
    ``SystemExit(1)`` — ``manage.py migrate`` against a stopped server printed an 89-line
    traceback. Other errors pass through as they are.

    The same holds when the error ends the auto-reloader's thread (:data:`AUTORELOAD_THREAD`,
    ``manage.py runserver``'s migration check): the line, then the process ends with status 1,
    so the reloader (the parent process) exits 1 too. Before, that thread printed an 83-line
    traceback and the server went on watching files, serving nothing."""
    from django.db.utils import OperationalError

    previous = threading.excepthook

    def end_with_one_line(args: threading.ExceptHookArgs) -> None:
        if (
            args.thread is not None
            and args.thread.name == AUTORELOAD_THREAD
            and isinstance(args.exc_value, OperationalError)
        ):
            sys.stdout.flush()
            print(_database_line(args.exc_value), file=sys.stderr, flush=True)
            # sys.exit would end only this thread; the reloader's main thread would watch on
            # (Django's runserver ends the same way when its port is taken)
            os._exit(EXIT_DATABASE)
        previous(args)

    threading.excepthook = end_with_one_line
    try:
        yield
    except OperationalError as exc:
        print(_database_line(exc), file=sys.stderr, flush=True)
        raise SystemExit(EXIT_DATABASE) from None
    finally:
        threading.excepthook = previous
