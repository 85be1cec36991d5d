"""Per-tenant throttling of job submissions (rate from settings; a fake clock, no sleeping)."""

from __future__ import annotations

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from cluster.models import Job
from cluster.throttles import SubmissionThrottle
from tests.api.conftest import JOBS_URL, job_body, redis_caches, rest_settings


class FakeClock:
    """A settable ``time.time`` stand-in for the throttle."""

    def __init__(self) -> None:
        self.now = 60.0 * 16_667  # the start of a one-minute window

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(SubmissionThrottle, "timer", fake)
    return fake


@override_settings(REST_FRAMEWORK=rest_settings(job_submit="2/min"))
def test_third_submission_in_a_minute_is_429(alice_api: APIClient, clock: FakeClock) -> None:
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 201
    clock.now += 10
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 201
    clock.now += 10
    response = alice_api.post(JOBS_URL, job_body(), format="json")
    assert response.status_code == 429
    # The window opened 20 s ago, so the next one opens in 60 - 20 = 40 s.
    assert response.json()["retry_after"] == 40
    assert response["Retry-After"] == "40"
    assert response.json()["error"].startswith("Request was throttled.")
    assert Job.objects.count() == 2
    clock.now += 39.5
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 429
    clock.now += 0.5  # the next window: a fresh budget of 2
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 201
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 201
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 429
    assert Job.objects.count() == 4


@override_settings(REST_FRAMEWORK=rest_settings(job_submit="2/min"))
def test_budget_is_per_tenant_and_shared_by_its_members(
    alice_api: APIClient, bob_api: APIClient, charlie_api: APIClient, clock: FakeClock
) -> None:
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 201
    assert bob_api.post(JOBS_URL, job_body(), format="json").status_code == 201
    assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 429
    assert bob_api.post(JOBS_URL, job_body(), format="json").status_code == 429
    assert charlie_api.post(JOBS_URL, job_body(gpus=1), format="json").status_code == 201


@override_settings(REST_FRAMEWORK=rest_settings(job_submit="1/min"))
def test_reads_and_cancels_are_not_throttled(alice_api: APIClient, clock: FakeClock) -> None:
    job = alice_api.post(JOBS_URL, job_body(), format="json").json()
    for _ in range(3):
        assert alice_api.get(JOBS_URL).status_code == 200
        assert alice_api.get(f"{JOBS_URL}{job['id']}/").status_code == 200
    assert alice_api.post(f"{JOBS_URL}{job['id']}/cancel/").status_code == 200


@override_settings(REST_FRAMEWORK=rest_settings(job_submit=None))
def test_no_rate_means_no_throttle(alice_api: APIClient, clock: FakeClock) -> None:
    for _ in range(5):
        assert alice_api.post(JOBS_URL, job_body(), format="json").status_code == 201


@pytest.mark.redis
@pytest.mark.parametrize(
    "backend", ["django.core.cache.backends.redis.RedisCache", "config.redis_cache.ReusedClientRedisCache"]
)
def test_counter_is_shared_through_redis(alice_api: APIClient, clock: FakeClock, backend: str) -> None:
    """With Redis as the cache (production: ``config.redis_cache``), the per-tenant counter lives
    there, for all workers."""
    with redis_caches(backend) as (caches, client, prefix):
        with override_settings(CACHES=caches, REST_FRAMEWORK=rest_settings(job_submit="2/min")):
            codes = [alice_api.post(JOBS_URL, job_body(), format="json").status_code for _ in range(3)]
        assert codes == [201, 201, 429]
        keys = client.keys(f"{prefix}:*throttle:*")  # (the cache also holds the round-request flag)
        assert len(keys) == 1 and int(client.get(keys[0])) == 3  # three submissions counted
        assert 0 < client.ttl(keys[0]) <= 61  # the window (60 s) plus one second


@pytest.mark.redis
def test_the_one_round_trip_incr_keeps_djangos_contract() -> None:
    """``config.redis_cache``'s ``incr``: a missing key is ``ValueError`` and stays missing (not
    created without an expiry), an existing one is incremented by ``delta`` and keeps its TTL."""
    from django.core.cache import caches as django_caches

    with redis_caches("config.redis_cache.ReusedClientRedisCache") as (caches, client, prefix):
        with override_settings(CACHES=caches):
            cache = django_caches.create_connection("default")
            with pytest.raises(ValueError):
                cache.incr("counter", 3)
            assert client.keys(f"{prefix}:*counter") == []
            assert cache.add("counter", 2, timeout=30)
            assert cache.incr("counter", 3) == 5 and cache.incr("counter") == 6
            assert cache.get("counter") == 6
            (key,) = client.keys(f"{prefix}:*counter")
            assert 0 < client.ttl(key) <= 30
