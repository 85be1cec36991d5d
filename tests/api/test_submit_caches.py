"""The submission path's caches (issue 16): a token's row and the cluster's bounds are kept between
requests, and every change that makes them wrong is seen by the very next request."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from cluster import token_cache
from cluster.models import Job, Membership, Node, Tenant
from scheduling.service import check_heartbeats
from tests.api.conftest import JOBS_URL, api_token, job_body, redis_caches

TOKEN_URL = "/api/v1/tenant/token/"
TRANSACTION_CONTROL = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT", "BEGIN", "COMMIT")
# The token's row cached in the (test: process-local) cache, as with Redis in production.
token_cache_on = override_settings(SHAREWISE_TOKEN_CACHE_S=60)


def statements(queries: CaptureQueriesContext) -> list[str]:
    """The SQL of the captured queries, without transaction control (savepoints in a test)."""
    return [q["sql"] for q in queries.captured_queries if not q["sql"].startswith(TRANSACTION_CONTROL)]


def client_with(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def submit(client: APIClient, **overrides: Any) -> Any:
    return client.post(JOBS_URL, job_body(**overrides), format="json")


@token_cache_on
@pytest.mark.usefixtures("pending_counts_held")
def test_a_submission_after_the_first_inserts_and_reads_only_the_learned_class(alice_api: APIClient) -> None:
    """Inserting the job and its ``submitted`` event (one statement on PostgreSQL), and the learned
    class of its iteration time: no token, cluster-bound, pending-count or own-samples query (the
    code before made 9)."""
    assert submit(alice_api).status_code == 201  # fills the caches
    with CaptureQueriesContext(connection) as queries:
        response = submit(alice_api, name="second")
    assert response.status_code == 201
    sql = statements(queries)
    writes = ["WITH"] if connection.vendor == "postgresql" else ["INSERT", "INSERT"]
    assert [s.split()[0] for s in sql] == [*writes, "SELECT"], sql
    assert "scheduling_learneditertime" in sql[-1]
    body = response.json()
    assert body["name"] == "second" and body["status"] == "pending"
    assert body["iteration_time_source"] == "profile" and body["scheduler_iteration_time_s"] > 0
    job = Job.objects.get(pk=body["id"])  # what the statement wrote: the row and its history
    assert (job.name, job.gpus, job.batch_size, job.iterations, job.sharing) == (
        "second",
        2,
        128,
        1000,
        "allowed",
    )
    assert (job.tenant.name, job.submitter.username, job.status, job.gpu_types) == (
        "team-a",
        "alice",
        "pending",
        [],
    )
    assert response["Location"] == f"{JOBS_URL}{job.pk}/"
    assert list(job.events.values_list("kind", "at", "message", "data")) == [
        ("submitted", job.submitted_at, "", {})
    ]


@token_cache_on
def test_a_rotated_token_is_refused_on_the_next_request_despite_the_cache(alice: Any, cluster: Any) -> None:
    old = api_token(alice)
    assert submit(client_with(old)).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        assert submit(client_with(old), name="cached").status_code == 201
    assert not any("cluster_apitoken" in s for s in statements(queries))  # the row came from the cache
    new = client_with(old).post(TOKEN_URL).json()["token"]
    assert submit(client_with(old), name="refused").status_code == 401
    assert submit(client_with(new), name="accepted").status_code == 201


@token_cache_on
def test_a_deactivated_or_deleted_user_is_refused_on_the_next_request(
    alice_api: APIClient, alice: Any
) -> None:
    assert submit(alice_api).status_code == 201
    alice.is_active = False
    alice.save()
    refused = submit(alice_api, name="refused")
    assert refused.status_code == 401 and "inactive" in refused.json()["error"]
    alice.is_active = True
    alice.save()
    assert submit(alice_api, name="again").status_code == 201
    get_user_model().objects.filter(pk=alice.pk).delete()
    assert submit(alice_api, name="gone").status_code == 401


@token_cache_on
def test_a_member_moved_to_another_tenant_submits_there_at_once(
    bob_api: APIClient, bob: Any, tenant_c: Tenant
) -> None:
    assert submit(bob_api).json()["id"]
    membership = Membership.objects.get(user=bob)
    membership.tenant = tenant_c
    membership.save()
    moved = submit(bob_api, name="moved")
    assert moved.status_code == 201
    assert tenant_c.jobs.get().name == "moved"
    membership.delete()
    assert submit(bob_api, name="no-tenant").status_code == 403


@token_cache_on
def test_the_tenants_new_default_sharing_applies_to_the_next_submission(
    alice_api: APIClient, tenant_a: Tenant
) -> None:
    assert submit(alice_api).json()["sharing"] == "allowed"
    tenant_a.default_sharing = "never"
    tenant_a.save()
    assert submit(alice_api, name="after").json()["sharing"] == "never"


def test_a_node_added_raises_the_accepted_gang_at_once(alice_api: APIClient) -> None:
    too_big = submit(alice_api, gpus=12)  # 8 GPUs registered (two nodes of four)
    assert too_big.status_code == 400
    assert too_big.json()["fields"]["gpus"] == ["at most 8 GPUs (the healthy GPUs of the cluster), got 12"]
    Node.register("node-02", 4, 16_000, "v100")
    assert submit(alice_api, gpus=12).status_code == 201


def test_a_gpu_reported_unhealthy_lowers_the_accepted_gang_at_once(alice_api: APIClient) -> None:
    assert submit(alice_api, gpus=8).status_code == 201
    gpu = Node.objects.get(name="node-01").gpus.get(index=0)
    gpu.healthy = False
    gpu.save()
    refused = submit(alice_api, gpus=8, name="refused")
    assert refused.json()["fields"]["gpus"] == ["at most 7 GPUs (the healthy GPUs of the cluster), got 8"]


def test_a_node_marked_silent_lowers_the_accepted_gang_at_once(alice_api: APIClient) -> None:
    """The heartbeat check marks a node by ``update()`` (no signal): it forgets the bounds itself."""
    assert submit(alice_api, gpus=8).status_code == 201
    later = timezone.now() + timedelta(hours=1)
    Node.objects.filter(name="node-00").update(last_heartbeat=later)  # node-01 stays silent
    assert list(check_heartbeats(now=later)) == ["node-01"]
    refused = submit(alice_api, gpus=8, name="refused")
    assert refused.json()["fields"]["gpus"] == ["at most 4 GPUs (the healthy GPUs of the cluster), got 8"]


@override_settings(SHAREWISE_MAX_PENDING_PER_TENANT=2)
def test_the_pending_cap_counts_exactly_near_it(alice_api: APIClient) -> None:
    assert submit(alice_api).status_code == 201
    assert submit(alice_api, name="two").status_code == 201
    assert submit(alice_api, name="three").status_code == 429


@pytest.mark.redis
def test_with_redis_a_rotated_token_is_refused_at_once(alice: Any, cluster: Any) -> None:
    """Production's cache (config/redis_cache.py, the token cache on by default): the token's row
    is kept in Redis, one Redis client serves every call, and a rotation deletes the row there."""
    with redis_caches("config.redis_cache.ReusedClientRedisCache") as (caches, client, prefix):
        with override_settings(CACHES=caches):
            from django.core.cache import cache

            assert token_cache.lifetime_s() == token_cache.DEFAULT_LIFETIME_S
            old = api_token(alice)
            assert submit(client_with(old)).status_code == 201
            assert len(client.keys(f"{prefix}:*api-token:*")) == 1  # the row, by the token's digest
            assert cache._cache.get_client() is cache._cache.get_client(write=True)  # one client
            new = client_with(old).post(TOKEN_URL).json()["token"]
            assert client.keys(f"{prefix}:*api-token:*") == []
            assert submit(client_with(old), name="refused").status_code == 401
            assert submit(client_with(new), name="accepted").status_code == 201
