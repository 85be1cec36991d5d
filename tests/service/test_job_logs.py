"""Jobs' output: agents send it in chunks (``POST /api/v1/agent/jobs/{id}/logs/``, node token),
the service keeps it bounded, the job's tenant reads it (``GET /api/v1/jobs/{id}/logs/``).

A job is placed on node-00 by a FIFO round; its run there is ``node-00/g1``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from cluster.joblogs import LOG_SETTLE_S
from cluster.models import Job, JobLogChunk, Node, Tenant
from scheduling import service
from tests.api.conftest import JOBS_URL, token_client
from tests.service.test_agent_api import agent, place


def send(client: APIClient, job_id: int, run: str, offset: int, data: str, eof: bool = False) -> Any:
    return client.post(
        f"/api/v1/agent/jobs/{job_id}/logs/",
        {"run": run, "offset": offset, "data": data, "eof": eof},
        format="json",
    )


def read(client: APIClient, job_id: int, **params: Any) -> dict[str, Any]:
    response = client.get(f"{JOBS_URL}{job_id}/logs/", params)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def fleet(db: None) -> dict[str, tuple[Node, str]]:
    """node-00 and node-01 (4 GPUs each) → (node, raw agent token)."""
    return {f"node-0{i}": Node.register(f"node-0{i}", 4, 16_000, "v100") for i in range(2)}


@pytest.fixture
def tenant(db: None) -> Tenant:
    return Tenant.create_with_owner("team-a", quota_gpus=8)[0]


@pytest.fixture
def member(tenant: Tenant) -> APIClient:
    return token_client(tenant.memberships.get().user)


@pytest.fixture
def placed(
    fleet: dict[str, tuple[Node, str]], tenant: Tenant, django_capture_on_commit_callbacks: Callable
) -> Iterator[Job]:
    service.set_dispatcher(lambda messages: None)
    try:
        yield place(tenant, django_capture_on_commit_callbacks)
    finally:
        service.set_dispatcher(None)


def test_chunks_are_stored_once_in_order(
    fleet: dict[str, tuple[Node, str]], placed: Job, member: APIClient
) -> None:
    node00 = agent(fleet["node-00"][1])
    assert send(node00, placed.pk, "node-00/g1", 0, "epoch 1\n").json() == {"received": 8}
    assert send(node00, placed.pk, "node-00/g1", 0, "epoch 1\n").json() == {"received": 8}  # a retry
    assert send(node00, placed.pk, "node-00/g1", 4, "h 1\nepoch 2\n").json() == {"received": 16}  # overlap
    body = read(member, placed.pk)
    assert body["data"] == "epoch 1\nepoch 2\n"
    assert (body["offset"], body["next_offset"], body["first_offset"]) == (0, 16, 0)
    assert body["complete"] is False and body["status"] == "running"
    # from an offset, and the last characters (negative offset)
    assert read(member, placed.pk, offset=8)["data"] == "epoch 2\n"
    assert read(member, placed.pk, offset=-8)["data"] == "epoch 2\n"
    assert read(member, placed.pk, offset=99)["data"] == ""


def test_lost_output_and_a_second_run_are_marked(
    fleet: dict[str, tuple[Node, str]], placed: Job, member: APIClient
) -> None:
    node00 = agent(fleet["node-00"][1])
    send(node00, placed.pk, "node-00/g1", 0, "a\n")
    send(node00, placed.pk, "node-00/g1", 10, "b\n")  # the agent dropped 8 characters
    send(node00, placed.pk, "node-00/g3", 0, "restarted\n")
    assert read(member, placed.pk)["data"] == (
        "a\n[sharewise: 8 characters of output were not received]\nb\n==> node-00/g3 <==\nrestarted\n"
    )


@override_settings(SHAREWISE_JOB_LOG_MAX_CHARS=10)
def test_old_output_is_dropped_past_the_bound(
    fleet: dict[str, tuple[Node, str]], placed: Job, member: APIClient
) -> None:
    node00 = agent(fleet["node-00"][1])
    for i, line in enumerate(("one\n", "two\n", "three\n")):
        send(node00, placed.pk, "node-00/g1", 4 * i if i < 2 else 8, line)
    # 14 characters arrived; whole chunks ending at or before 14 - 10 = 4 go: "one\n"
    body = read(member, placed.pk)
    assert body["data"] == "two\nthree\n" and body["first_offset"] == 4 and body["offset"] == 4
    assert JobLogChunk.objects.filter(job=placed).count() == 2


def test_only_the_jobs_nodes_may_send_and_only_its_tenant_may_read(
    fleet: dict[str, tuple[Node, str]], placed: Job, member: APIClient, charlie: Any
) -> None:
    assert send(agent(fleet["node-01"][1]), placed.pk, "node-01/g1", 0, "x\n").status_code == 403
    assert send(agent(fleet["node-00"][1]), 999_999, "node-00/g1", 0, "x\n").status_code == 404
    assert send(APIClient(), placed.pk, "node-00/g1", 0, "x\n").status_code == 401
    bad = send(agent(fleet["node-00"][1]), placed.pk, "", 0, "x\n")
    assert bad.status_code == 400 and "run" in bad.json()["fields"]
    too_long = send(agent(fleet["node-00"][1]), placed.pk, "node-00/g1", 0, "x" * 4001)
    assert too_long.status_code == 400
    assert token_client(charlie).get(f"{JOBS_URL}{placed.pk}/logs/").status_code == 404
    assert member.get(f"{JOBS_URL}{placed.pk}/logs/", {"offset": "x"}).status_code == 400


def test_the_log_is_complete_once_the_job_ended_and_its_runs_said_so(
    fleet: dict[str, tuple[Node, str]], placed: Job, member: APIClient
) -> None:
    node00 = agent(fleet["node-00"][1])
    send(node00, placed.pk, "node-00/g1", 0, "last words\n")
    placed.cancel()
    assert read(member, placed.pk)["complete"] is False  # its run may still send (the job stopping)
    send(node00, placed.pk, "node-00/g1", 11, "", eof=True)
    body = read(member, placed.pk)
    assert body["complete"] is True and body["data"] == "last words\n" and body["status"] == "cancelled"


def test_a_job_that_never_ran_has_a_complete_empty_log_soon_after_it_ends(
    tenant: Tenant, member: APIClient, fleet: dict[str, tuple[Node, str]]
) -> None:
    job = Job.objects.create(
        tenant=tenant, name="never", model="resnet50", batch_size=128, iterations=1, gpus=1
    )
    job.cancel()
    assert read(member, job.pk)["complete"] is False  # within LOG_SETTLE_S of its end
    assert job.finished_at is not None
    Job.objects.filter(pk=job.pk).update(finished_at=job.finished_at - timedelta(seconds=LOG_SETTLE_S))
    assert read(member, job.pk) == {
        "job_id": job.pk,
        "status": "cancelled",
        "offset": 0,
        "next_offset": 0,
        "data": "",
        "first_offset": 0,
        "complete": True,
    }


@override_settings(SHAREWISE_LOG_WAIT_MAX_S=0.6)
def test_a_read_waits_for_output_at_most_the_bound(
    fleet: dict[str, tuple[Node, str]], placed: Job, member: APIClient
) -> None:
    started = time.monotonic()
    body = read(member, placed.pk, wait=30)  # asks 30 s, gets 0.6 s at most
    waited = time.monotonic() - started
    assert body["data"] == "" and 0.5 <= waited < 5
