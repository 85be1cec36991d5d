"""What used to be open to anyone: /metrics, the schema and docs, unlimited dashboard passwords,
and a production process running on the public development SECRET_KEY."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.django_db
def test_metrics_answer_only_the_allow_list_or_the_token() -> None:
    assert Client().get("/metrics").status_code == 200  # the test client is 127.0.0.1: allowed
    outside = Client(REMOTE_ADDR="203.0.113.7")
    denied = outside.get("/metrics")
    assert denied.status_code == 403 and "SHAREWISE_METRICS_TOKEN" in denied.json()["error"]
    # through a proxy the address is the proxy's: loopback is not enough then
    assert Client().get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.7").status_code == 403
    with override_settings(SHAREWISE_METRICS_TOKEN="s3cret-scrape-token"):
        assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token").status_code == 200
        assert outside.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    with override_settings(SHAREWISE_METRICS_ALLOW=["203.0.113.0/24"]):
        assert outside.get("/metrics").status_code == 200
        assert Client().get("/metrics").status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize("query", ["", "?format=yaml", "?format=json"])
def test_the_schemas_refusal_is_the_apis_json_error(db: None, query: str) -> None:
    # the schema's renderer is YAML: an anonymous caller got `error: ...` as a YAML document
    answer = Client().get(f"/api/schema/{query}", HTTP_AUTHORIZATION="Token not-a-token")
    assert answer.status_code == 401
    assert answer["Content-Type"] == "application/json"
    assert answer.json() == {"error": "Invalid token."}
    anonymous = Client().get(f"/api/schema/{query}")
    assert anonymous.status_code == 401 and anonymous["Content-Type"] == "application/json"
    assert anonymous.json() == {"error": "Authentication credentials were not provided."}


def test_schema_and_docs_need_a_login_unless_opened(django_user_model: Any) -> None:
    anonymous = Client()
    assert anonymous.get("/api/schema/").status_code == 401
    docs = anonymous.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"] == "/dashboard/login/?next=/api/docs/"
    with override_settings(SHAREWISE_PUBLIC_API_DOCS=True):
        assert anonymous.get("/api/schema/").status_code == 200
        assert anonymous.get("/api/docs/").status_code == 200
    member = Client()
    member.force_login(django_user_model.objects.create_user("reader"))
    assert member.get("/api/schema/").status_code == 200 and member.get("/api/docs/").status_code == 200


@pytest.mark.django_db
@override_settings(AXES_FAILURE_LIMIT=5)
def test_dashboard_logins_are_throttled(django_user_model: Any) -> None:
    django_user_model.objects.create_user("alice", password="a-long-passphrase-7")
    client = Client(REMOTE_ADDR="198.51.100.4")
    for _ in range(4):
        assert client.post("/dashboard/login/", {"username": "alice", "password": "nope"}).status_code == 200
    # the fifth wrong password locks the address out: 429, and so is the right one afterwards
    assert client.post("/dashboard/login/", {"username": "alice", "password": "nope"}).status_code == 429
    locked = client.post("/dashboard/login/", {"username": "alice", "password": "a-long-passphrase-7"})
    assert locked.status_code == 429 and b"too many" in locked.content.lower()
    # another address is not locked
    other = Client(REMOTE_ADDR="198.51.100.5")
    ok = other.post("/dashboard/login/", {"username": "alice", "password": "a-long-passphrase-7"})
    assert ok.status_code == 302


def import_settings(**env: str) -> subprocess.CompletedProcess:
    """Import the settings in a fresh interpreter with ``env`` (on top of a clean environment)."""
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith(("SECRET_KEY", "DEBUG", "SHAREWISE_ENV"))
    }
    return subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_refuses_the_development_key_and_debug() -> None:
    good = "k" * 10 + "x7Qw-2pLr_9Zt4Vn8Bm1Hc6Jd3Fs5Gy0Ka2Pe4Ru6Ti8Wo1Xq3Yz5Cv7Bn9Mm0"
    assert import_settings().returncode == 0  # development: the default key is fine
    no_key = import_settings(SHAREWISE_ENV="production")
    assert no_key.returncode != 0 and "needs a SECRET_KEY of its own" in no_key.stderr
    short = import_settings(SHAREWISE_ENV="production", SECRET_KEY="short")
    assert short.returncode != 0 and "at least 50 characters" in short.stderr
    debug = import_settings(SHAREWISE_ENV="production", SECRET_KEY=good, DEBUG="1")
    assert debug.returncode != 0 and "DEBUG must be off" in debug.stderr
    assert import_settings(SHAREWISE_ENV="production", SECRET_KEY=good).returncode == 0
