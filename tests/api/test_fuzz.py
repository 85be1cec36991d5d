"""Fuzz every operation of the OpenAPI schema with schemathesis, as a tenant member and as a
cluster admin: never a 5xx.

The requests go to the WSGI app in-process (no server). Examples per operation are kept modest
so the suite stays quick; throttling is off so submissions are not cut short by 429s.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error

from config.wsgi import application
from tests.api.conftest import api_token, rest_settings


@contextmanager
def keep_test_connection() -> Iterator[None]:
    """Let bare WSGI calls reuse the test's database connection, as Django's test client does.

    At the end of each request a WSGI handler fires ``close_old_connections``, which on
    PostgreSQL closes the connection holding the test's transaction. Django's test client
    disconnects it around each of its requests (and reconnects it after), so this must wrap
    the schemathesis calls themselves.
    """
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    try:
        yield
    finally:
        for signal in (request_started, request_finished):
            signal.connect(close_old_connections)


@pytest.fixture
def api_schema(db: None) -> Any:
    with keep_test_connection():
        return schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture
def alice_token(alice: Any, cluster: Any, alice_job: Any, settings: Any) -> str:
    """Alice's token, with a cluster and one job of hers present, and no submission throttle."""
    settings.REST_FRAMEWORK = rest_settings(job_submit=None)
    return api_token(alice)


@pytest.fixture
def admin_token(alice_token: str) -> str:
    """A cluster admin's token (``is_staff``), in the same world as ``alice_token``."""
    admin = get_user_model().objects.create_user("root-admin", is_staff=True)
    return api_token(admin)


FUZZ = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def call(case: Any, token: str) -> None:
    """Send ``case`` with ``token`` and fail on any 5xx answer."""
    with keep_test_connection():
        case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=[not_a_server_error])


@schema.parametrize()
@FUZZ
def test_no_server_errors_as_tenant_member(case: Any, alice_token: str) -> None:
    call(case, alice_token)


@schema.parametrize()
@FUZZ
def test_no_server_errors_as_admin(case: Any, admin_token: str) -> None:
    call(case, admin_token)
