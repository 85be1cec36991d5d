"""Idempotency-Key on job submission: same key and body → the same job; other body → 422."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from cluster.models import Job, JobEvent
from tests.api.conftest import JOBS_URL, api_token, job_body, token_client
from tests.conftest import skip_or_fail


def submit(client: APIClient, key: str | None, **overrides: Any) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(JOBS_URL, job_body(**overrides), format="json", **headers)


def test_same_key_same_body_returns_the_same_job(alice_api: APIClient) -> None:
    first = submit(alice_api, "k-1")
    again = submit(alice_api, "k-1")
    assert first.status_code == 201 and again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 1 and JobEvent.objects.count() == 1


def test_key_order_in_the_body_does_not_matter(alice_api: APIClient) -> None:
    body = job_body()
    first = alice_api.post(JOBS_URL, body, format="json", HTTP_IDEMPOTENCY_KEY="k")
    reordered = dict(reversed(list(body.items())))
    again = alice_api.post(JOBS_URL, reordered, format="json", HTTP_IDEMPOTENCY_KEY="k")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]


def test_same_key_other_body_is_422(alice_api: APIClient) -> None:
    first = submit(alice_api, "k-1")
    response = submit(alice_api, "k-1", gpus=4)
    assert response.status_code == 422
    assert response.json() == {
        "error": f"Idempotency-Key already used for job {first.json()['id']} with a different request body"
    }
    assert Job.objects.count() == 1


def test_a_teammate_reusing_the_key_gets_the_same_job(alice_api: APIClient, bob_api: APIClient) -> None:
    first = submit(alice_api, "shared")
    assert submit(bob_api, "shared").json()["id"] == first.json()["id"]


def test_keys_are_per_tenant(alice_api: APIClient, charlie_api: APIClient) -> None:
    alice_job = submit(alice_api, "same-key").json()
    charlie = submit(charlie_api, "same-key", gpus=1)
    assert charlie.status_code == 201 and charlie.json()["id"] != alice_job["id"]


def test_without_key_every_submission_is_a_new_job(alice_api: APIClient) -> None:
    submit(alice_api, None)
    submit(alice_api, None)
    assert Job.objects.count() == 2


@pytest.mark.parametrize("key", ["", "x" * 129, "has space", "caf\u00e9"])
def test_malformed_key_is_400(alice_api: APIClient, key: str) -> None:
    response = submit(alice_api, key)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()["fields"]
    assert not Job.objects.exists()


@pytest.mark.postgres
@pytest.mark.parametrize("precheck", [True, False], ids=["with-precheck", "insert-race-only"])
def test_concurrent_duplicates_make_one_job(
    transactional_db: None, cluster: Any, alice: Any, monkeypatch: pytest.MonkeyPatch, precheck: bool
) -> None:
    """Eight threads submit the same body with one key at once: one job, every answer names it.

    Without the pre-insert look-up every thread inserts, so seven hit the unique constraint and
    must answer with the winner's job.
    """
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (set DATABASE_URL=postgres://...) for concurrent inserts")
    threads = 8
    api_token(alice)  # issued once, before the threads (issuing again would replace it)
    barrier = threading.Barrier(threads)
    answers: list[tuple[int, int]] = []
    lock = threading.Lock()

    def worker() -> None:
        client = token_client(alice)
        barrier.wait()
        try:
            response = submit(client, "race-key")
            with lock:
                answers.append((response.status_code, response.json()["id"]))
        finally:
            connection.close()

    if not precheck:
        real = Job.earlier_submission.__func__
        calls = threading.local()

        def skip_first_lookup(cls: type[Job], tenant: Any, key: str | None) -> Job | None:
            calls.n = getattr(calls, "n", 0) + 1
            return None if calls.n == 1 else real(cls, tenant, key)

        monkeypatch.setattr(Job, "earlier_submission", classmethod(skip_first_lookup))
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert Job.objects.count() == 1 and JobEvent.objects.count() == 1
    job_id = Job.objects.get().pk
    assert sorted(answers) == sorted([(201, job_id)] + [(200, job_id)] * (threads - 1))
