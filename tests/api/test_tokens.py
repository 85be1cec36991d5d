"""Tenant API tokens hashed at rest (like node tokens), shown once, rotatable by their member."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

from django.apps import apps
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from cluster.api_tokens import ApiToken
from cluster.models import Tenant
from common.tokens import hash_token

TOKEN_URL = "/api/v1/tenant/token/"


def client_with(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def test_only_the_hash_of_a_tenant_token_is_stored(db: None) -> None:
    _, raw = Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    row = ApiToken.objects.get(user__username="alice")
    assert row.digest == hash_token(raw) and len(row.digest) == 64
    assert raw not in (row.digest, row.prefix) and raw.startswith(row.prefix) and len(row.prefix) == 6
    assert client_with(raw).get("/api/v1/tenant/").status_code == 200
    assert client_with(row.digest).get("/api/v1/tenant/").status_code == 401  # the digest is no token


def test_a_member_rotates_their_token_and_the_old_one_stops_working(db: None) -> None:
    _, old = Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    answer = client_with(old).post(TOKEN_URL)
    assert answer.status_code == 201 and answer["Cache-Control"] == "no-store"
    new = answer.json()["token"]
    assert new != old and len(new) == 43
    assert client_with(old).get("/api/v1/tenant/").status_code == 401
    assert client_with(new).get("/api/v1/tenant/").json()["name"] == "team-a"
    assert ApiToken.objects.filter(user__username="alice").count() == 1


def test_rotation_refuses_unknown_fields_and_keeps_the_token(db: None) -> None:
    # {"x": 1} was a 201 and the token rotated, where every other endpoint refuses unknown fields
    _, old = Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    answer = client_with(old).post(TOKEN_URL, {"x": 1}, format="json")
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "invalid input: x: unknown or read-only field",
        "fields": {"x": ["unknown or read-only field"]},
    }
    listed = client_with(old).post(TOKEN_URL, [1], format="json")
    assert listed.status_code == 400
    assert listed.json()["error"] == "invalid input: this endpoint takes no body, or an empty object {}"
    assert client_with(old).get("/api/v1/tenant/").json()["name"] == "team-a"  # not rotated
    assert client_with(old).post(TOKEN_URL, {}, format="json").status_code == 201


def test_rotation_needs_a_tenant_member(staff_api: APIClient, client: Any) -> None:
    assert staff_api.post(TOKEN_URL).status_code == 403
    assert APIClient().post(TOKEN_URL).status_code == 401


def test_plaintext_tokens_of_an_earlier_install_are_carried_over_hashed(db: None) -> None:
    Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    alice = apps.get_model("auth", "User").objects.get(username="alice")
    ApiToken.objects.all().delete()
    with connection.cursor() as cursor:  # DRF's authtoken table, as an earlier version left it
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp, user_id int)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            ["0123456789abcdef0123456789abcdef01234567", timezone.now(), alice.pk],
        )
    migration = importlib.import_module("cluster.migrations.0006_api_tokens_hashed")
    migration.hash_plaintext_tokens(apps, SimpleNamespace(connection=connection))
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
    token = ApiToken.find("0123456789abcdef0123456789abcdef01234567")
    assert token is not None and token.user == alice and token.prefix == "012345"
