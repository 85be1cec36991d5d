"""Who a dashboard request is (cluster/session_store.py, cluster/user_backend.py, the membership
and trace clock reads): each is one plain statement now, and each answers as Django's own reads
did — an expired, unknown or ended session is anonymous (401), an inactive, deleted or
re-passworded user too, a member's scope follows their membership, the newest trace clock wins."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import Membership
from cluster.visibility import Viewer, viewer_of
from frontend.payloads.clock import TimeScale, time_scale
from scheduling.models import TraceClock
from tests.frontend.conftest import session_client

pytestmark = pytest.mark.django_db

LEARNING = "/dashboard/api/learning.json"


def scope(client: Client) -> Any:
    """The learning endpoint's status and, on 200, its ``scope``."""
    response = client.get(LEARNING)
    return response.json()["scope"] if response.status_code == 200 else response.status_code


def test_the_engine_and_backend_are_the_one_statement_ones() -> None:
    assert settings.SESSION_ENGINE == "cluster.session_store"
    assert settings.AUTHENTICATION_BACKENDS[-1] == "cluster.user_backend.UserBackend"


def test_a_live_session_is_its_user_and_an_expired_one_is_anonymous(alice: Any) -> None:
    client = session_client(alice)
    assert scope(client) == "tenant team-a"
    key = client.cookies[settings.SESSION_COOKIE_NAME].value
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    assert scope(client) == 401


def test_an_unknown_or_malformed_session_key_is_anonymous(alice: Any) -> None:
    for key in ("x" * 32, "short", ""):
        client = Client()
        client.cookies[settings.SESSION_COOKIE_NAME] = key
        assert scope(client) == 401, key


def test_a_session_key_with_a_nul_is_anonymous_not_a_500(alice: Any) -> None:
    """PostgreSQL refuses NUL in text (psycopg's DataError was a 500 on every page and the API);
    SQLite found no row. The login page and the API answer as for no session."""
    client = Client()
    client.cookies[settings.SESSION_COOKIE_NAME] = "abcdefgh\x00ijk"
    assert scope(client) == 401
    assert client.get("/dashboard/login/").status_code == 200
    assert client.get("/api/v1/jobs/").status_code == 401


def test_a_deleted_session_row_is_anonymous(alice: Any) -> None:
    client = session_client(alice)
    Session.objects.all().delete()
    assert scope(client) == 401


def test_an_inactive_or_deleted_user_is_anonymous(alice: Any, bob: Any) -> None:
    alice_client, bob_client = session_client(alice), session_client(bob)
    alice.is_active = False
    alice.save()
    assert scope(alice_client) == 401
    bob.delete()
    assert scope(bob_client) == 401


def test_a_new_password_ends_the_other_sessions(alice: Any) -> None:
    client = session_client(alice)
    alice.set_password("another-long-passphrase-9")
    alice.save()
    assert scope(client) == 401


def test_a_members_scope_follows_the_membership(alice: Any, tenant_c: Any) -> None:
    client = session_client(alice)
    Membership.objects.filter(user=alice).update(tenant=tenant_c)
    assert scope(client) == "tenant team-c"
    Membership.objects.filter(user=alice).delete()
    assert scope(client) == 403
    alice.is_staff = True
    alice.save()
    assert scope(client) == "cluster"


def test_viewer_of_by_hand(alice: Any, tenant_a: Any) -> None:
    assert viewer_of(alice) == Viewer(tenant_a.pk, "team-a")
    assert viewer_of(get_user_model().objects.create_user("dave")) is None
    assert viewer_of(get_user_model().objects.create_user("root", is_staff=True)) == Viewer()


def test_the_newest_trace_clock_gives_the_time_scale() -> None:
    assert time_scale() == TimeScale()
    origin = datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC)
    TraceClock.objects.create(speedup=10.0, trace_origin_s=5.0, wall_origin=origin, trace="old")
    TraceClock.objects.create(speedup=60.0, trace_origin_s=120.5, wall_origin=origin, trace="philly")
    assert time_scale() == TimeScale(60.0, 120.5, 1_767_323_045.678901, "philly")


def test_a_poll_reads_session_user_membership_and_clock_once_each(alice: Any) -> None:
    client = session_client(alice)
    client.get(LEARNING)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(LEARNING).status_code == 200
    tables = [q["sql"] for q in queries.captured_queries]
    for table in ("django_session", "auth_user", "cluster_membership", "scheduling_traceclock"):
        assert sum(f'FROM "{table}"' in sql for sql in tables) == 1, table
    assert not any(sql.lstrip().upper().startswith(("UPDATE", "INSERT")) for sql in tables)
