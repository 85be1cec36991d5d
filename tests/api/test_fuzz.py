"""Fuzz every operation of the live OpenAPI schema with schemathesis, with every check on, as a
tenant member, a cluster admin and a node agent: no 5xx, and no failed check.

The requests go to the WSGI app in-process (no server). Examples per operation are kept modest
so that the three runs take a couple of minutes; throttling is off so that submissions are not
cut short by 429s.

``positive_data_acceptance`` (schema-valid data must be accepted) also expects 400 or 422 where
the API documents a rule that a schema cannot state, and only there: a submission whose gang or
memory exceeds what the cluster has now, or whose Idempotency-Key was used with another body; an
admin's tenant, quota or node whose name (or tenant and GPU type) is taken, or whose tenant id
names no tenant.
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
from schemathesis.config import SchemathesisConfig

from cluster.models import Node
from config.wsgi import application
from tests.api.conftest import api_token, rest_settings

#: Statuses that schema-valid data may earn besides schemathesis' defaults, per operation.
BUSINESS_RULES = [
    ("/api/v1/jobs/", "POST", ["400", "422"]),
    ("/api/v1/admin/tenants/", "POST", ["400"]),
    ("/api/v1/admin/tenants/{id}/", "PATCH", ["400"]),
    ("/api/v1/admin/quotas/", "POST", ["400"]),
    ("/api/v1/admin/quotas/{id}/", "PATCH", ["400"]),
    ("/api/v1/admin/nodes/", "POST", ["400"]),
    # many jobs, each valid, may still pass the body limit (DATA_UPLOAD_MAX_MEMORY_SIZE): 413
    ("/api/v1/jobs/bulk/", "POST", ["400", "413", "422"]),
]
DEFAULT_ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
#: Statuses that schema-violating data may earn besides schemathesis' defaults, per operation
#: (each also in BUSINESS_RULES).
TOO_LARGE = [("/api/v1/jobs/bulk/", "POST", ["413"])]
DEFAULT_REJECTED = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "5xx"]


def fuzz_config() -> SchemathesisConfig:
    """Every check enabled; the statuses of :data:`BUSINESS_RULES` and :data:`TOO_LARGE`."""
    too_large = {(path, method): extra for path, method, extra in TOO_LARGE}
    operations = []
    for path, method, extra in BUSINESS_RULES:
        checks: dict[str, Any] = {"positive_data_acceptance": {"expected-statuses": DEFAULT_ACCEPTED + extra}}
        if (path, method) in too_large:
            rejected = DEFAULT_REJECTED + too_large[(path, method)]
            checks["negative_data_rejection"] = {"expected-statuses": rejected}
        operations.append({"include-path": path, "include-method": method, "checks": checks})
    return SchemathesisConfig.from_dict({"checks": {"enabled": True}, "operations": operations})


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
def world(alice: Any, cluster: list[Node], alice_job: Any, settings: Any) -> dict[str, str]:
    """A cluster, Alice with one job, a cluster admin, and node-00's agent; their Authorization
    headers. No submission throttle."""
    settings.REST_FRAMEWORK = rest_settings(job_submit=None)
    admin = get_user_model().objects.create_user("root-admin", is_staff=True)
    node = cluster[0]
    node_token = node.issue_agent_token()
    node.save()
    return {
        "tenant": f"Token {api_token(alice)}",
        "admin": f"Token {api_token(admin)}",
        "node": f"Node {node_token}",
    }


@pytest.fixture
def api_schema(world: dict[str, str]) -> Any:
    with keep_test_connection():
        return schemathesis.openapi.from_wsgi(
            "/api/schema/?format=json",
            application,
            config=fuzz_config(),
            headers={"Authorization": world["admin"]},
        )


schema = schemathesis.pytest.from_fixture("api_schema")

FUZZ = settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def call(case: Any, authorization: str) -> None:
    """Send ``case`` with ``authorization`` and run every check on the answer."""
    with keep_test_connection():
        case.call_and_validate(headers={"Authorization": authorization})


@schema.parametrize()
@FUZZ
def test_no_failed_check_as_tenant_member(case: Any, world: dict[str, str]) -> None:
    call(case, world["tenant"])


@schema.parametrize()
@FUZZ
def test_no_failed_check_as_admin(case: Any, world: dict[str, str]) -> None:
    call(case, world["admin"])


@schema.parametrize()
@FUZZ
def test_no_failed_check_as_node_agent(case: Any, world: dict[str, str]) -> None:
    call(case, world["node"])
