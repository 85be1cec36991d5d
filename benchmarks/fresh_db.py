"""A fresh database for a benchmark, and Django set up on it (one place for every benchmark).

PostgreSQL databases named in a URL are dropped and created again (connecting to the server's
``postgres`` database); a SQLite URL names a new file. Benchmarks only: nothing here runs in the
service.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent


def recreate_postgres(url: str) -> None:
    """Drop and create the PostgreSQL database named in ``url``. Exits with a one-line message
    for a name that is not a plain identifier (it is spliced into the SQL) or a server that
    cannot be reached."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        sys.exit(f"refusing odd database name {name!r}")
    try:
        with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        sys.exit(f"cannot recreate database {name!r} at {parts.hostname}:{parts.port or 5432}: {reason}")


def setup_django(database_url: str, *, fresh: bool = True) -> None:
    """Point Django at ``database_url`` (recreated first when it is PostgreSQL and ``fresh``),
    set it up and migrate quietly."""
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    if fresh and database_url.startswith("postgres"):
        recreate_postgres(database_url)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def analyze() -> None:
    """Gather the planner's statistics for every table of Django's database (``ANALYZE`` on
    PostgreSQL and SQLite). A deployment's autovacuum does this after a bulk load; a server
    with autovacuum off, or a benchmark timed before autovacuum wakes, would otherwise plan
    every query without statistics (row counts guessed from the table's size on disk)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def backend_cpu_s() -> float | None:
    """CPU time (user + system, s) of the PostgreSQL backend serving Django's connection so far,
    read from ``/proc`` (a server on this machine only); ``None`` on SQLite or where it cannot
    be read."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state is fields[0]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


if __name__ == "__main__":  # a module the benchmarks import: run, it says so (and answers --help)
    from cli_args import module_only

    raise SystemExit(module_only(__file__, __doc__))
