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


def first_line(exc: BaseException) -> str:
    """The first non-blank line of ``exc``'s message, stripped (its type's name when it has
    none). A driver's message goes on over lines (psycopg: ``Is the server running ...?``, the
    query's ``LINE 1: ...``); a one-line report keeps the first."""
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


#: PostgreSQL's SQLSTATE of a table that does not exist (undefined_table).
UNDEFINED_TABLE = "42P01"


def is_missing_table(exc: BaseException) -> bool:
    """Whether ``exc`` (a Django ``DatabaseError``) says a table does not exist: PostgreSQL's
    ``undefined_table`` or SQLite's ``no such table``, what a database not yet migrated answers."""
    if getattr(exc.__cause__, "sqlstate", None) == UNDEFINED_TABLE:
        return True
    return str(exc).startswith("no such table: ")


def has_unapplied_migrations() -> bool:
    """Whether the default database lacks one of the project's migrations; ``True`` when that
    cannot be told (the check itself failing: the database's state is then unknown)."""
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.db.migrations.executor import MigrationExecutor

    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        return bool(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    except Exception:  # noqa: BLE001 (an error report must not end in another traceback)
        return True


def database_line(exc: BaseException) -> str | None:
    """The one line (``error: ...``) that reports ``exc``, a Django ``DatabaseError``, or
    ``None`` for an error that is not the database's state but the program's (left to its
    traceback): a missing table while migrations are unapplied says to run ``manage.py migrate``;
    any ``OperationalError`` says the database cannot be used, with the driver's first line."""
    from django.db.utils import OperationalError

    if is_missing_table(exc) and has_unapplied_migrations():
        return (
            f"error: the database (DATABASE_URL) is not migrated ({first_line(exc)}): "
            "run `python manage.py migrate`"
        )
    if isinstance(exc, OperationalError):
        return f"error: the database (DATABASE_URL) cannot be used: {first_line(exc)}"
    return None


@contextmanager
def database_errors_in_one_line() -> Iterator[None]:
    """Run a command; a database that cannot be used (Django's ``OperationalError``: the server
    not reachable, the login refused, SQLite's file not openable) prints ``error: the database
    (DATABASE_URL) cannot be used: <the driver's first line>`` on stderr and raises
    ``SystemExit(1)`` — ``manage.py migrate`` against a stopped server printed an 89-line
    traceback. A database not migrated yet (a table missing, migrations unapplied) prints
    ``error: the database (DATABASE_URL) is not migrated (<the driver's first line>): run
    `python manage.py migrate``` and raises ``SystemExit(1)`` — PostgreSQL's ``ProgrammingError``
    was a traceback. Other errors pass through as they are (:func:`database_line`).

    The same holds when the error ends the auto-reloader's thread (:data:`AUTORELOAD_THREAD`,
    ``manage.py runserver``'s migration check): the line, then the process ends with status 1,
    so the reloader (the parent process) exits 1 too. Before, that thread printed an 83-line
    traceback and the server went on watching files, serving nothing."""
    from django.db.utils import DatabaseError

    previous = threading.excepthook

    def end_with_one_line(args: threading.ExceptHookArgs) -> None:
        if (
            args.thread is not None
            and args.thread.name == AUTORELOAD_THREAD
            and isinstance(args.exc_value, DatabaseError)
            and (line := database_line(args.exc_value)) is not None
        ):
            sys.stdout.flush()
            print(line, file=sys.stderr, flush=True)
            # sys.exit would end only this thread; the reloader's main thread would watch on
            # (Django's runserver ends the same way when its port is taken)
            os._exit(EXIT_DATABASE)
        previous(args)

    threading.excepthook = end_with_one_line
    try:
        yield
    except DatabaseError as exc:
        line = database_line(exc)
        if line is None:
            raise
        print(line, file=sys.stderr, flush=True)
        raise SystemExit(EXIT_DATABASE) from None
    finally:
        threading.excepthook = previous
