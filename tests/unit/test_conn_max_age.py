"""Persistent database connections (``CONN_MAX_AGE``) where a bounded pool of workers reuses them,
none under Django's development server, which starts a thread per request and left each one's
connection open and idle behind it (config/settings.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def conn_max_age(argv: list[str], **env: str) -> str:
    """``CONN_MAX_AGE`` of the default database as a fresh interpreter started as ``argv`` reads
    its settings with ``env`` set (``CONN_MAX_AGE`` unset unless given); on a refused setting,
    the error's last line."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SHAREWISE_", "CONN_MAX_AGE"))}
    code = (
        f"import sys; sys.argv = {argv!r}; from django.conf import settings; "
        "print(settings.DATABASES['default']['CONN_MAX_AGE'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout.strip() if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    "argv",
    [
        ["manage.py", "runserver"],
        ["manage.py", "runserver", "127.0.0.1:8000", "--noreload"],
        ["/usr/bin/django-admin", "runserver"],
        ["manage.py", "testserver", "fixture.json"],
    ],
)
def test_the_development_server_closes_connections_after_each_request(argv: list[str]) -> None:
    """Before, 60 s here too: every request thread's connection outlived it."""
    assert conn_max_age(argv) == "0"
    assert conn_max_age(argv, CONN_MAX_AGE="60") == "0"  # .env.example's value: still 0


@pytest.mark.parametrize(
    "argv",
    [
        ["/usr/bin/gunicorn", "config.wsgi", "--worker-class", "gthread", "--threads", "4"],
        ["/usr/bin/celery", "-A", "config", "worker", "-Q", "scheduler"],
        ["manage.py", "run_scheduler", "--interval", "2"],
        ["manage.py", "demo"],
        ["manage.py", "shell", "-c", "runserver"],
    ],
)
def test_pooled_workers_keep_their_connections(argv: list[str]) -> None:
    assert conn_max_age(argv) == "60"
    assert conn_max_age(argv, CONN_MAX_AGE="30") == "30"


def test_a_bad_value_is_refused_under_the_development_server_too() -> None:
    assert "CONN_MAX_AGE" in conn_max_age(["manage.py", "runserver"], CONN_MAX_AGE="soon")
