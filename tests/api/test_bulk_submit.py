"""``POST /api/v1/jobs/bulk/``: many jobs in one request, validated as one by one, all or nothing,
idempotent per job, counted job by job by the tenant's throttle."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from cluster import bulk_submit
from cluster.bulk_submit import MAX_BULK_JOBS
from cluster.models import Job, JobEvent
from tests.api.conftest import job_body, rest_settings

BULK_URL = "/api/v1/jobs/bulk/"


def bulk(client: APIClient, jobs: list[Any]) -> Any:
    return client.post(BULK_URL, {"jobs": jobs}, format="json")


def test_jobs_are_created_in_order_with_their_events(alice_api: APIClient, alice: Any) -> None:
    response = bulk(alice_api, [job_body(name=f"run-{i}", gpus=1 + i % 2) for i in range(5)])
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["created"], body["replayed"]) == (5, 0)
    assert [j["name"] for j in body["jobs"]] == [f"run-{i}" for i in range(5)]
    assert [j["gpus"] for j in body["jobs"]] == [1, 2, 1, 2, 1]
    assert all(j["status"] == "pending" for j in body["jobs"])
    jobs = Job.objects.filter(tenant__name="team-a").order_by("id")
    assert [j.name for j in jobs] == [f"run-{i}" for i in range(5)]
    assert {j.submitter_id for j in jobs} == {alice.pk}
    assert JobEvent.objects.filter(kind=JobEvent.Kind.SUBMITTED, job__in=jobs).count() == 5
    assert [j["id"] for j in body["jobs"]] == [j.pk for j in jobs]


def test_one_invalid_job_submits_none_and_each_mistake_is_named(alice_api: APIClient) -> None:
    jobs = [job_body(), job_body(gpus=9), job_body(colour="red"), "not a job", job_body()]
    response = bulk(alice_api, jobs)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "3 of 5 job(s) are invalid; none was submitted"
    assert set(body["items"]) == {"1", "2", "3"}
    assert "at most 8 GPUs" in body["items"]["1"]["gpus"][0]  # the cluster fixture: 8 healthy GPUs
    assert "colour" in str(body["items"]["2"])
    assert body["items"]["3"] == {"non_field_errors": ["must be a JSON object (one job)"]}
    assert Job.objects.count() == 0


@pytest.mark.parametrize(
    "payload",
    [{}, {"jobs": []}, {"jobs": "x"}, {"jobs": [job_body()], "more": 1}, [job_body()]],
)
def test_a_malformed_body_is_400(alice_api: APIClient, payload: Any) -> None:
    response = alice_api.post(BULK_URL, payload, format="json")
    assert response.status_code == 400
    assert "jobs" in response.json()["error"]
    assert Job.objects.count() == 0


def test_more_than_the_most_jobs_is_400(alice_api: APIClient) -> None:
    response = bulk(alice_api, [{"name": "x"}] * (MAX_BULK_JOBS + 1))
    assert response.status_code in (400, 413)  # the body limit may bind first
    assert Job.objects.count() == 0


def test_keys_make_a_retried_request_submit_nothing_twice(alice_api: APIClient) -> None:
    jobs = [{**job_body(name=f"run-{i}"), "idempotency_key": f"k-{i}"} for i in range(3)]
    first = bulk(alice_api, jobs[:2])
    assert first.status_code == 201
    again = bulk(alice_api, jobs)  # the first two again, and one new
    assert again.status_code == 201
    body = again.json()
    assert (body["created"], body["replayed"]) == (1, 2)
    assert [j["id"] for j in body["jobs"][:2]] == [j["id"] for j in first.json()["jobs"]]
    assert Job.objects.count() == 3
    all_replayed = bulk(alice_api, jobs)
    assert all_replayed.status_code == 200 and all_replayed.json()["created"] == 0


def test_a_key_reused_with_another_body_is_422_and_nothing_is_written(alice_api: APIClient) -> None:
    assert bulk(alice_api, [{**job_body(), "idempotency_key": "k"}]).status_code == 201
    response = bulk(alice_api, [job_body(name="fresh"), {**job_body(iterations=5), "idempotency_key": "k"}])
    assert response.status_code == 422
    assert set(response.json()["items"]) == {"1"}
    assert Job.objects.count() == 1


def test_an_idempotency_key_header_is_refused_not_ignored(alice_api: APIClient) -> None:
    # before: 201 every time, the header ignored, so 16 retries of one request made 16 jobs
    for _ in range(2):
        response = alice_api.post(BULK_URL, {"jobs": [job_body()]}, format="json", HTTP_IDEMPOTENCY_KEY="k")
        assert response.status_code == 400
        assert '"idempotency_key"' in response.json()["error"]
    assert Job.objects.count() == 0


def test_a_key_twice_in_one_request_or_malformed_is_400(alice_api: APIClient) -> None:
    jobs = [{**job_body(), "idempotency_key": "k"}, {**job_body(), "idempotency_key": "k"}]
    jobs.append({**job_body(), "idempotency_key": "bad key"})
    response = bulk(alice_api, jobs)
    assert response.status_code == 400
    items = response.json()["items"]
    assert items["1"]["idempotency_key"] == ["already used by job 0 of this request"]
    assert "visible ASCII" in items["2"]["idempotency_key"][0]


def test_the_same_key_is_per_tenant(alice_api: APIClient, charlie_api: APIClient) -> None:
    assert bulk(alice_api, [{**job_body(), "idempotency_key": "k"}]).status_code == 201
    other = bulk(charlie_api, [{**job_body(iterations=7), "idempotency_key": "k"}])
    assert other.status_code == 201  # Charlie's key, not Alice's job
    assert Job.objects.filter(tenant__name="team-c").count() == 1


@pytest.mark.usefixtures("pending_counts_held")
def test_the_cluster_is_read_once_for_all_jobs(alice_api: APIClient) -> None:
    """The number of queries does not grow with the jobs (the cluster's bounds read once)."""
    assert bulk(alice_api, [job_body()]).status_code == 201  # the first also fills the caches
    counts = []
    for n in (1, 20):
        with CaptureQueriesContext(connection) as queries:
            assert bulk(alice_api, [job_body() for _ in range(n)]).status_code == 201
        counts.append(len(queries))
    assert counts[0] == counts[1]


@override_settings(REST_FRAMEWORK=rest_settings(job_submit="5/min"))
def test_the_throttle_counts_every_job(alice_api: APIClient) -> None:
    assert bulk(alice_api, [job_body() for _ in range(4)]).status_code == 201
    response = bulk(alice_api, [job_body() for _ in range(2)])  # 4 + 2 > 5
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert Job.objects.count() == 4


@override_settings(SHAREWISE_MAX_PENDING_PER_TENANT=3)
def test_the_pending_cap_counts_the_new_jobs(alice_api: APIClient) -> None:
    assert bulk(alice_api, [job_body(), job_body()]).status_code == 201
    response = bulk(alice_api, [job_body(), job_body()])
    assert response.status_code == 429
    assert "2 pending jobs; 2 more would pass the 3" in response.json()["error"]
    assert bulk(alice_api, [job_body()]).status_code == 201


def test_anonymous_is_401(cluster: Any) -> None:
    assert bulk(APIClient(), [job_body()]).status_code == 401


def test_plain_jobs_are_checked_without_the_serializer_and_answered_the_same(
    alice_api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plain submission check takes the plain jobs (no ``JobSerializer`` built for them); a job
    it declines (GPU types, a mistake) still gets the serializer's answer; the answer and the jobs
    written are those of the serializer alone (``SHAREWISE_FAST_SUBMIT=false``)."""
    built: list[Any] = []
    real = bulk_submit.JobSerializer

    def counted(*args: Any, **kwargs: Any) -> Any:
        if "data" in kwargs:  # built to validate (the answer's serializer has none)
            built.append(kwargs["data"])
        return real(*args, **kwargs)

    monkeypatch.setattr(bulk_submit, "JobSerializer", counted)
    jobs = [job_body(name=f"p-{i}", priority=i, sharing="never") for i in range(3)]
    answers = []
    for quick in (True, False):
        with override_settings(SHAREWISE_FAST_SUBMIT=quick):
            built.clear()
            names = [{**job, "name": f"{job['name']}-{quick}".lower()} for job in jobs]
            response = bulk(alice_api, names)
            assert response.status_code == 201, response.json()
            answers.append(
                [
                    {k: v for k, v in j.items() if k not in ("id", "name", "submitted_at")}
                    for j in response.json()["jobs"]
                ]
            )
            assert len(built) == (0 if quick else 3)
            built.clear()
            bad = bulk(alice_api, [job_body(name="ok"), job_body(name="x y"), job_body(gpu_types=["nope"])])
            assert bad.status_code == 400
            assert set(bad.json()["items"]) == {"1", "2"}
            assert len(built) == (2 if quick else 3)  # the plain first job needs no serializer
    assert answers[0] == answers[1]
    fields = ("priority", "sharing", "gpus", "iterations", "batch_size", "model")
    rows = [
        list(Job.objects.filter(name__endswith=f"-{q}".lower()).order_by("id").values_list(*fields))
        for q in (True, False)
    ]
    assert rows[0] == rows[1] and len(rows[0]) == 3
