"""Fixtures for API and service tests: a small cluster and the three people of every permission test.

Alice (owner) and Bob (member) belong to tenant ``team-a``; Charlie belongs to ``team-c`` and
must see none of A's things. ``*_api`` fixtures are DRF test clients authenticated by token.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework.test import APIClient

from cluster import pending_count
from cluster.api_tokens import ApiToken
from cluster.models import Membership, Node, Tenant
from tests.conftest import skip_or_fail

JOBS_URL = "/api/v1/jobs/"


def job_body(**overrides: Any) -> dict[str, Any]:
    """A valid job submission (2-GPU ResNet-50, global batch 128, 1000 iterations), with overrides."""
    body: dict[str, Any] = {
        "name": "resnet-run",
        "model": "resnet50",
        "batch_size": 128,
        "iterations": 1000,
        "gpus": 2,
    }
    body.update(overrides)
    return body


def api_token(user: Any) -> str:
    """``user``'s API token, issued on first use and remembered on the user object (the database
    keeps only its hash, so a second client of the same user object reuses it)."""
    raw = getattr(user, "_test_api_token", None)
    if raw is None:
        _, raw = ApiToken.issue(user)
        user._test_api_token = raw
    return raw


def token_client(user: Any) -> APIClient:
    """An API client sending ``Authorization: Token <key>`` for ``user``."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user)}")
    return client


def rest_settings(**throttle_rates: str | None) -> dict[str, Any]:
    """``REST_FRAMEWORK`` settings with the given throttle rates changed (for ``override_settings``)."""
    rest = dict(settings.REST_FRAMEWORK)
    rest["DEFAULT_THROTTLE_RATES"] = {**rest["DEFAULT_THROTTLE_RATES"], **throttle_rates}
    return rest


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Throttle counters live in the cache; every test starts with none."""
    cache.clear()


@pytest.fixture
def pending_counts_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tenant's pending count, once read, stays good for the whole test: a test that counts a
    submission's queries must not depend on how fast the machine runs it (the count is kept
    :data:`cluster.pending_count.LIFETIME_S` = 1 s, and a slow CI run took longer between the
    request that read it and the one counted, which then read it again)."""
    monkeypatch.setattr(pending_count, "LIFETIME_S", 3600.0)


@pytest.fixture
def cluster(db: None) -> list[Node]:
    """Two nodes of four 16,000 MB V100s each: 8 healthy GPUs, so the largest gang is 8."""
    return [Node.register(f"node-0{i}", 4, 16_000, "v100")[0] for i in range(2)]


@pytest.fixture
def tenant_a(db: None) -> Tenant:
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=4, borrow_limit=2, username="alice")
    return tenant


@pytest.fixture
def tenant_c(db: None) -> Tenant:
    tenant, _ = Tenant.create_with_owner("team-c", quota_gpus=2, username="charlie")
    return tenant


@pytest.fixture
def alice(tenant_a: Tenant) -> Any:
    return get_user_model().objects.get(username="alice")


@pytest.fixture
def bob(tenant_a: Tenant) -> Any:
    user = get_user_model().objects.create_user("bob")
    Membership.objects.create(user=user, tenant=tenant_a, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def charlie(tenant_c: Tenant) -> Any:
    return get_user_model().objects.get(username="charlie")


@pytest.fixture
def alice_api(alice: Any, cluster: list[Node]) -> APIClient:
    return token_client(alice)


@pytest.fixture
def bob_api(bob: Any, cluster: list[Node]) -> APIClient:
    return token_client(bob)


@pytest.fixture
def charlie_api(charlie: Any, cluster: list[Node]) -> APIClient:
    return token_client(charlie)


@pytest.fixture
def staff_api(db: None, cluster: list[Node]) -> APIClient:
    """A cluster admin (``is_staff``) with no tenant."""
    return token_client(get_user_model().objects.create_user("root-admin", is_staff=True))


@pytest.fixture
def alice_job(alice_api: APIClient) -> dict[str, Any]:
    """A job Alice submitted (the response body)."""
    response = alice_api.post(JOBS_URL, job_body(name="alice-job"), format="json")
    assert response.status_code == 201, response.content
    return response.json()


@contextmanager
def redis_caches(backend: str) -> Iterator[tuple[dict[str, Any], redis.Redis, str]]:
    """Django ``CACHES`` on the real Redis of ``REDIS_URL`` with ``backend``, under a key prefix
    of this test's own: yields ``(caches, a Redis client, the prefix)`` and deletes the prefix's
    keys afterwards. Skips (or fails, where real services are required) without ``REDIS_URL``."""
    url = os.environ.get("REDIS_URL")
    if not url:
        skip_or_fail("needs Redis (set REDIS_URL=redis://...)")
    prefix = f"sharewise-test-{uuid.uuid4().hex}"
    caches = {"default": {"BACKEND": backend, "LOCATION": url, "KEY_PREFIX": prefix}}
    client = redis.Redis.from_url(url)
    try:
        yield caches, client, prefix
    finally:
        for key in client.keys(f"{prefix}:*"):
            client.delete(key)
