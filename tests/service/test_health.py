"""/healthz (process alive), /readyz (database reachable) and where /metrics is served."""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.db.backends.utils import CursorWrapper
from django.test import Client


def test_healthz(db: None) -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_when_the_database_answers(db: None) -> None:
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_readyz_is_503_when_the_database_fails(db: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def down(self: CursorWrapper, sql: str, params: object = None) -> None:
        raise OperationalError("connection refused")

    with monkeypatch.context() as patch:
        patch.setattr(CursorWrapper, "execute", down)
        response = Client().get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "error": "database unreachable: connection refused"}


def test_metrics_is_served_at_the_site_root(db: None) -> None:
    """``config/urls.py`` mounts the scheduling app's Prometheus endpoint at ``/metrics``."""
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")


def test_site_root_redirects_to_the_dashboard(db: None) -> None:
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"] == "/dashboard/"
