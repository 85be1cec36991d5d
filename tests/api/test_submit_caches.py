"""The submission path's caches (issue 16): a token's row and the cluster's bounds are kept between
requests (both read by one round trip), and every change that makes them wrong is seen by the
very next request."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import redis
from django.contrib.auth import get_user_model
from django.core.cache import cache, caches
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from cluster import cluster_facts, token_cache
from cluster.cache_reads import read_together
from cluster.models import Job, Membership, Node, Tenant
from scheduling.service import check_heartbeats, knowledge
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
def test_a_submission_after_the_first_only_inserts(
    alice_api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inserting the job and its ``submitted`` event (one statement on PostgreSQL): no token,
    cluster-bound, pending-count, own-samples or learned-class query (the code before made 9; the
    class is kept per process for ``SHAREWISE_CLASS_CACHE_S``, here on a clock held still)."""
    monkeypatch.setattr(knowledge, "monotonic", lambda: 1000.0)
    assert submit(alice_api).status_code == 201  # fills the caches
    with CaptureQueriesContext(connection) as queries:
        response = submit(alice_api, name="second")
    assert response.status_code == 201
    sql = statements(queries)
    writes = ["WITH"] if connection.vendor == "postgresql" else ["INSERT", "INSERT"]
    assert [s.split()[0] for s in sql] == writes, sql
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


@pytest.fixture
def cache_reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """The reads the requests make of the default cache, as ``(method, keys)``: ``get`` and
    ``get_many`` called by the code (a ``get`` that the process-local cache's ``get_many`` makes
    for each of its keys is part of that one read)."""
    backend = caches["default"]
    calls: list[tuple[str, Any]] = []
    inside = [0]
    get, get_many = backend.get, backend.get_many

    def counted_get(key: str, *args: Any, **kwargs: Any) -> Any:
        if not inside[0]:
            calls.append(("get", key))
        return get(key, *args, **kwargs)

    def counted_get_many(keys: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(("get_many", sorted(keys)))
        inside[0] += 1
        try:
            return get_many(keys, *args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(backend, "get", counted_get)
    monkeypatch.setattr(backend, "get_many", counted_get_many)
    return calls


@token_cache_on
def test_the_token_and_the_cluster_facts_are_one_cache_read(
    alice_api: APIClient, alice: Any, cache_reads: list[tuple[str, Any]]
) -> None:
    """Both cached: one ``get_many`` of the two keys (one ``MGET`` on Redis), no ``get``, no query of
    either; the code before made two ``get`` calls."""
    assert submit(alice_api).status_code == 201  # fills both entries
    cache_reads.clear()
    with CaptureQueriesContext(connection) as queries:
        assert submit(alice_api, name="second").status_code == 201
    token_key = token_cache.cache_key(api_token(alice))
    assert cache_reads == [("get_many", sorted([token_key, cluster_facts.KEY]))]
    assert not any("cluster_apitoken" in s or "cluster_gpu" in s for s in statements(queries))


@token_cache_on
def test_a_missing_entry_is_read_from_the_database_and_cached_again(
    alice_api: APIClient, alice: Any, cache_reads: list[tuple[str, Any]]
) -> None:
    """The facts forgotten (a node changed), the token's row still cached: the facts are read (and
    cached), the token is not; then the token's row forgotten: the token is read, the facts not."""
    assert submit(alice_api).status_code == 201
    cache_reads.clear()
    for forget, read, kept in (
        (cluster_facts.forget, "cluster_gpu", "cluster_apitoken"),
        (lambda: token_cache.forget_users([alice.pk]), "cluster_apitoken", "cluster_gpu"),
    ):
        forget()
        with CaptureQueriesContext(connection) as queries:
            assert submit(alice_api, name="again").status_code == 201
        sql = statements(queries)
        assert any(read in s for s in sql) and not any(kept in s for s in sql), sql
        assert [method for method, _ in cache_reads] == ["get_many"]  # one read, whatever it found
        assert len(cache.get_many([cluster_facts.KEY, token_cache.cache_key(api_token(alice))])) == 2
        cache_reads.clear()


@token_cache_on
def test_a_cache_that_does_not_answer_leaves_both_to_the_database(
    alice_api: APIClient, alice: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one read failing (Redis unreachable) is each entry's own outage: the token and the facts
    are read from the database, not written back, and the submission is answered."""
    assert submit(alice_api).status_code == 201

    def unreachable(*args: Any, **kwargs: Any) -> Any:
        raise redis.exceptions.ConnectionError("no route to the cache")

    stored: list[str] = []
    monkeypatch.setattr(caches["default"], "get_many", unreachable)
    monkeypatch.setattr(caches["default"], "set", lambda key, *args, **kwargs: stored.append(key))
    with CaptureQueriesContext(connection) as queries:
        assert submit(alice_api, name="without-cache").status_code == 201
    sql = statements(queries)
    assert any("cluster_apitoken" in s for s in sql) and any("cluster_gpu" in s for s in sql), sql
    assert stored == []  # no write to a cache that did not answer (each would wait its timeout)


def test_with_the_token_cache_off_only_the_facts_are_read(
    alice_api: APIClient, cache_reads: list[tuple[str, Any]]
) -> None:
    """A process-local cache without ``SHAREWISE_TOKEN_CACHE_S`` (the embedded default): the token
    is the database's, the facts one ``get`` as before; with the facts off too, no read at all."""
    assert token_cache.lifetime_s() == 0
    assert submit(alice_api).status_code == 201
    assert cache_reads == [("get", cluster_facts.KEY)]
    with override_settings(SHAREWISE_CLUSTER_FACTS_CACHE_S=0):
        assert submit(alice_api, name="no-cache").status_code == 201
    assert cache_reads == [("get", cluster_facts.KEY)]


@pytest.mark.redis
def test_with_redis_a_submission_reads_the_cache_once(
    alice: Any, cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Production's cache: one ``MGET`` for the token's row and the facts, no ``GET``."""
    with redis_caches("config.redis_cache.ReusedClientRedisCache") as (caches_, client, prefix):
        with override_settings(CACHES=caches_):
            sent: list[str] = []
            execute = redis.Redis.execute_command

            def counted(self: Any, *args: Any, **options: Any) -> Any:
                sent.append(str(args[0]).upper())
                return execute(self, *args, **options)

            monkeypatch.setattr(redis.Redis, "execute_command", counted)
            token = api_token(alice)
            assert submit(client_with(token)).status_code == 201
            sent.clear()
            assert submit(client_with(token), name="second").status_code == 201
            assert [c for c in sent if c in ("GET", "MGET")] == ["MGET"], sent


def test_read_together_answers_as_cache_get_would() -> None:
    """Keys read ahead answer from the one read (a key set since is not seen: it was read before);
    another key is read when asked; one key or none is ``cache.get`` itself."""
    cache.set("a", 1)
    get = read_together(["a", None, "b"])
    cache.set("b", 2)
    cache.set("c", 3)
    assert (get("a"), get("b"), get("c")) == (1, None, 3)
    assert read_together(["a", None]) == cache.get
