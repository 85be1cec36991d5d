"""A bad environment setting stops a process with one line naming it, exit status 2 (a usage
error), under ``manage.py``, gunicorn and Celery alike (config/startup.py). Before, ``manage.py
check`` printed a 52-line traceback, gunicorn 70 and Celery 88, the message on the last line —
for ``SHAREWISE_HEARTBEAT_TIMEOUT_S=abc`` only ``could not convert string to float: ''`` — and
``SHAREWISE_SUBMIT_RATE=lots`` or ``SHAREWISE_BORROW_BOUND_S=-5`` started cleanly and failed
later (every submission a 500; every round)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
RATE = "a rate N/s, N/m, N/h or N/d (e.g. 600/min) with N >= 1"


def run(argv: list[str], **env: str) -> subprocess.CompletedProcess:
    """``argv`` in a fresh process at the repository root with ``env`` over a clean environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SHAREWISE_", "SECRET_KEY", "DEBUG"))}
    clean.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(argv, cwd=REPO, env={**clean, **env}, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("name", "value", "accepted"),
    [
        ("SHAREWISE_HEARTBEAT_TIMEOUT_S", "abc", "a number of seconds > 0"),
        ("SHAREWISE_SILENCE_ALLOWANCE_MAX_S", "abc", "a number of seconds from 0 to 3600"),
        ("SHAREWISE_ROUND_INTERVAL_S", "0", "a number of seconds > 0"),
        ("SHAREWISE_ROUND_INTERVAL_S", "5s", "a number of seconds > 0"),
        ("SHAREWISE_BORROW_BOUND_S", "-5", "a number of seconds > 0"),
        ("SHAREWISE_LOGIN_LOCKOUT_S", "nan", "a number of seconds > 0"),
        ("SHAREWISE_SUBMIT_RATE", "lots", RATE),
        ("SHAREWISE_AGENT_TRANSPORT", "carrier-pigeon", "one of pull, push"),
        ("SHAREWISE_SPLIT_CHARGE", "maybe", "true or false (1/0, yes/no, on/off)"),
        ("SHAREWISE_ROUNDS_KEPT", "1e3", "a whole number >= 1"),
        ("SHAREWISE_TIRESIAS_THRESHOLDS", "5000,100", "increasing"),
    ],
)
def test_manage_py_check_says_one_line(name: str, value: str, accepted: str) -> None:
    done = run([sys.executable, "manage.py", "check"], **{name: value})
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [f"error: {name} must be {accepted}; got {value!r}"]


def test_a_production_refusal_is_one_line_too() -> None:
    done = run([sys.executable, "manage.py", "check"], SHAREWISE_ENV="production")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith("error: SHAREWISE_ENV=production needs a SECRET_KEY of its own")


def test_celery_says_one_line() -> None:
    celery = BIN / "celery"
    argv = [str(celery), "-A", "config", "worker", "-Q", "none", "--without-gossip", "--without-mingle"]
    done = run(argv, SHAREWISE_HEARTBEAT_TIMEOUT_S="abc")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: SHAREWISE_HEARTBEAT_TIMEOUT_S must be a number of seconds > 0; got 'abc'"
    ]


@pytest.mark.skipif(
    not (BIN / "gunicorn").exists() and not shutil.which("gunicorn"), reason="gunicorn not installed"
)
def test_gunicorn_stops_in_the_master_with_one_line() -> None:
    """The master loads the settings (gunicorn.conf.py on_starting): no worker is started, so
    none fails with a traceback and none is restarted."""
    gunicorn = str(BIN / "gunicorn") if (BIN / "gunicorn").exists() else "gunicorn"
    argv = [gunicorn, "config.wsgi", "--bind", "127.0.0.1:0", "--log-level", "warning"]
    done = run(argv, SHAREWISE_SUBMIT_RATE="lots")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: SHAREWISE_SUBMIT_RATE must be {RATE}; got 'lots'"]


def test_production_cookies_are_secure_unless_turned_off() -> None:
    """check --deploy's W012 (session cookie) and W016 (CSRF cookie) are gone in production;
    SHAREWISE_SECURE_COOKIES=0 (no TLS in front) brings them back, knowingly."""
    key = "k" * 10 + "x7Qw-2pLr_9Zt4Vn8Bm1Hc6Jd3Fs5Gy0Ka2Pe4Ru6Ti8Wo1Xq3Yz5Cv7Bn9Mm0"
    argv = [sys.executable, "manage.py", "check", "--deploy"]
    secure = run(argv, SHAREWISE_ENV="production", SECRET_KEY=key)
    assert "security.W012" not in secure.stderr + secure.stdout
    assert "security.W016" not in secure.stderr + secure.stdout
    plain = run(argv, SHAREWISE_ENV="production", SECRET_KEY=key, SHAREWISE_SECURE_COOKIES="0")
    assert "security.W012" in plain.stderr and "security.W016" in plain.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DATABASE_URL", "nonsense://sharewise:s3cret-pw@db/sharewise"),
        ("DATABASE_URL", "nonsense"),
        ("DATABASE_URL", "mysql://sharewise:s3cret-pw@db/sharewise"),  # a 62-line traceback before
        ("DATABASE_URL", "oracle://sharewise:s3cret-pw@db/sharewise"),
        ("DATABASE_URL", "postgres://sharewise:s3cret-pw@db:notaport/sharewise"),  # a ValueError before
        ("DATABASE_URL", "postgres://sharewise:s3cret-pw@db:99999/sharewise"),
        ("DATABASE_URL", "postgres://sharewise:s3cret-pw/sharewise"),  # no @: the password read as the port
        ("DATABASE_URL", "postgres://sharewise:s3cret-pw@[::1/sharewise"),
        ("CACHE_URL", "nonsense://s3cret-pw@cache/1"),
        ("STATIC_ROOT", "/proc/no/such/folder"),
    ],
)
def test_bad_urls_and_folders_are_one_line_without_the_password(name: str, value: str) -> None:
    """Before: a KeyError traceback (DATABASE_URL), 'Invalid cache schema' naming nothing
    (CACHE_URL), a FileNotFoundError traceback (STATIC_ROOT)."""
    done = run([sys.executable, "manage.py", "check"], **{name: value})
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(f"error: {name} must be ")
    assert "s3cret-pw" not in done.stderr


@pytest.mark.parametrize(
    "url",
    [
        "postgres://sharewise:s3cret-pw@db:notaport/sharewise",
        "postgres://sharewise:s3cret-pw@db:99999/sharewise",
        "postgres://sharewise:s3cret-pw/sharewise",
    ],
)
def test_a_port_that_does_not_parse_is_said_so(url: str) -> None:
    done = run([sys.executable, "manage.py", "check"], DATABASE_URL=url)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: DATABASE_URL must be a database URL such as postgres://USER:PASSWORD@HOST:5432/NAME or "
        "sqlite:///PATH; got one of scheme 'postgres' whose host or port does not parse (HOST:PORT, "
        "the port a whole number from 0 to 65535, an IPv6 host in [brackets])"
    ]


@pytest.mark.parametrize("scheme", ["mysql", "oracle", "postgis", "mssql"])
def test_a_database_engine_sharewise_does_not_run_on_is_said_so(scheme: str) -> None:
    """Before: mysql:// was refused as if it were no database URL at all (``must be a database
    URL such as ...``), not as a database Sharewise does not support."""
    done = run([sys.executable, "manage.py", "check"], DATABASE_URL=f"{scheme}://sharewise:s3cret-pw@db/sw")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: DATABASE_URL must be a database URL such as postgres://USER:PASSWORD@HOST:5432/NAME or "
        f"sqlite:///PATH; got one of scheme {scheme!r}, a database engine Sharewise does not support "
        "(it runs on PostgreSQL and SQLite only)"
    ]


@pytest.mark.parametrize(
    "url",
    ["postgres://sharewise:s3cret-pw@127.0.0.1:1/sharewise", "sqlite:////proc/no/such/folder/db.sqlite3"],
)
def test_a_database_that_cannot_be_used_is_one_line(url: str) -> None:
    """Before: ``manage.py migrate`` against a server that is not running printed an 89-line
    ``OperationalError`` traceback (port 1 refuses at once on loopback; the SQLite file's folder
    does not exist)."""
    done = run([sys.executable, "manage.py", "migrate"], DATABASE_URL=url)
    assert done.returncode == 1, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: the database (DATABASE_URL) cannot be used: ")
    assert "s3cret-pw" not in done.stderr


def run_server(argv: list[str], url: str) -> tuple[int | None, str]:
    """``manage.py runserver`` with ``argv`` against ``url``: its exit status (``None``: still
    running after 60 s, then killed with the reloader's child) and stderr. Its own session, so
    the kill reaches the child the reloader restarted."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SHAREWISE_", "SECRET_KEY", "DEBUG"))}
    clean.pop("DJANGO_SETTINGS_MODULE", None)
    command = [sys.executable, "manage.py", "runserver", *argv, "127.0.0.1:0"]
    with subprocess.Popen(
        command,
        cwd=REPO,
        env={**clean, "DATABASE_URL": url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as server:
        try:
            _, stderr = server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            return None, server.communicate()[1]
        return server.returncode, stderr


@pytest.mark.parametrize("argv", [[], ["--noreload"]], ids=["reloading", "noreload"])
@pytest.mark.parametrize(
    "url",
    ["postgres://sharewise:s3cret-pw@127.0.0.1:1/sharewise", "sqlite:////proc/no/such/folder/db.sqlite3"],
)
def test_runserver_with_a_database_that_cannot_be_used_is_one_line(argv: list[str], url: str) -> None:
    """Before: with the auto-reloader, its thread printed an 83-line ``OperationalError``
    traceback and the server went on watching files, serving nothing, never exiting. The
    reloader's own first line (``Watching for file changes with ...``) is its usual start."""
    status, stderr = run_server(argv, url)
    assert status == 1, stderr
    lines = [line for line in stderr.splitlines() if not line.startswith("Watching for file changes with ")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: the database (DATABASE_URL) cannot be used: ")
    assert "Traceback" not in stderr and "s3cret-pw" not in stderr


MIGRATE = "run `python manage.py migrate`"


def unmigrated_urls(tmp_path: Path) -> list[str]:
    """Databases with none of the tables: an empty SQLite file and, when DATABASE_URL names a
    PostgreSQL database, that database seen through a schema that does not exist (nothing is
    created)."""
    urls = [f"sqlite:///{tmp_path / 'empty.sqlite3'}"]
    given = os.environ.get("DATABASE_URL", "")
    if given.startswith(("postgres://", "postgresql://")):
        joiner = "&" if "?" in given else "?"
        urls.append(f"{given}{joiner}options=-c%20search_path%3Dsharewise_not_migrated")
    return urls


@pytest.mark.parametrize(
    ("argv", "table"),
    [(["create_tenant", "acme", "--quota-gpus", "2"], "cluster_tenant"), (["run_scheduler", "--once"], None)],
    ids=["create_tenant", "run_scheduler"],
)
def test_a_database_not_migrated_says_to_migrate(tmp_path: Path, argv: list[str], table: str | None) -> None:
    """Before: PostgreSQL's ``ProgrammingError`` traceback (relation "cluster_tenant" does not
    exist); SQLite's said the database "cannot be used"; run_scheduler --once printed the query
    over three lines."""
    for url in unmigrated_urls(tmp_path):
        done = run([sys.executable, "manage.py", *argv], DATABASE_URL=url)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1, done.stderr
        assert lines[0].startswith("error: the database (DATABASE_URL) is not migrated ("), lines
        assert lines[0].endswith(f"): {MIGRATE}"), lines
        if table is not None:
            assert table in lines[0]


def test_run_scheduler_once_with_a_database_that_cannot_be_used_is_one_line() -> None:
    """Before: two lines, psycopg's second (``Is the server running on that host ...?``) too."""
    url = "postgres://sharewise:s3cret-pw@127.0.0.1:1/sharewise"
    done = run([sys.executable, "manage.py", "run_scheduler", "--once"], DATABASE_URL=url)
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("CommandError: round failed: connection failed: ")
    assert "s3cret-pw" not in done.stderr


@pytest.mark.django_db
def test_only_a_missing_table_with_migrations_to_apply_is_not_migrated() -> None:
    """A missing table on a database with every migration applied, or another query error, is
    the program's error, not the database's state: left to its traceback."""
    from django.db.utils import OperationalError, ProgrammingError

    from config.startup import database_line, has_unapplied_migrations

    assert not has_unapplied_migrations()  # the test database is migrated
    assert database_line(ProgrammingError("no such table: cluster_gone")) is None
    assert database_line(ProgrammingError('syntax error at or near "SELEC"')) is None
    assert database_line(OperationalError("no such table: cluster_gone\nmore")) == (
        "error: the database (DATABASE_URL) cannot be used: no such table: cluster_gone"
    )
