"""Only runnable jobs are accepted: agents declare their executor in heartbeats, and a job without
a command is refused (400) where every node that declared runs real processes; one accepted
before that was known waits, never placed where it would fail (cluster.runnable)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from cluster.models import Job, Node, Placement
from cluster.runnable import HELD_WITHOUT_COMMAND as HELD
from scheduling import service
from tests.api.conftest import JOBS_URL, job_body
from tests.service.test_agent_api import HEARTBEAT_URL, agent

GPUS = [{"index": i, "uuid": f"declared-x-{i}", "memory_mb": 16_000, "healthy": True} for i in range(4)]


def beat(node: str, token: str, executor: str | None) -> Any:
    body: dict[str, Any] = {"node": node, "gpus": GPUS, "running": []}
    if executor is not None:
        body["executor"] = executor
    return agent(token).post(HEARTBEAT_URL, body, format="json")


@pytest.fixture
def tokens(cluster: list[Node]) -> dict[str, str]:
    """New agent tokens of node-00 and node-01 (the cluster fixture's nodes)."""
    found = {}
    for node in cluster:
        found[node.name] = node.issue_agent_token()
        node.save()
    return found


def submit(api: APIClient, **fields: Any) -> Any:
    return api.post(JOBS_URL, job_body(**fields), format="json")


def test_heartbeats_declare_the_executor(tokens: dict[str, str]) -> None:
    assert beat("node-00", tokens["node-00"], "subprocess").status_code == 200
    assert Node.objects.get(name="node-00").executor == "subprocess"
    assert beat("node-00", tokens["node-00"], None).status_code == 200  # an older agent: kept
    assert Node.objects.get(name="node-00").executor == "subprocess"
    bad = beat("node-00", tokens["node-00"], "docker")
    assert bad.status_code == 400 and "executor" in bad.json()["fields"]


def test_a_job_without_a_command_is_refused_where_nothing_emulates(
    alice_api: APIClient, tokens: dict[str, str]
) -> None:
    for node, token in tokens.items():
        beat(node, token, "subprocess")
    refused = submit(alice_api)
    assert refused.status_code == 400
    message = refused.json()["fields"]["command"][0]
    assert message.startswith("required on this cluster: its node agents run each job's command")
    assert submit(alice_api, command="python train.py").status_code == 201
    assert submit(alice_api, command="").status_code == 400


@pytest.mark.parametrize(
    "declared",
    [
        {},  # no agent has sent a heartbeat yet: nothing known, accepted
        {"node-00": "emulated", "node-01": "emulated"},
        {"node-00": "emulated", "node-01": "subprocess"},  # an emulating node can run it
    ],
)
def test_a_job_without_a_command_is_accepted_where_something_can_run_it(
    alice_api: APIClient, tokens: dict[str, str], declared: dict[str, str]
) -> None:
    for node, executor in declared.items():
        beat(node, tokens[node], executor)
    assert submit(alice_api).status_code == 201


def test_a_job_accepted_before_any_agent_declared_waits_instead_of_failing(
    alice_api: APIClient,
    tokens: dict[str, str],
    sent: list[dict[str, Any]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """Accepted while nothing was known; then every agent declares it runs processes. The job used
    to be placed on one of them, whose agent failed it ("the placement has no command"); now it
    waits, saying why, until a node that emulates takes jobs."""
    waiting = submit(alice_api, name="no-command")
    assert waiting.status_code == 201
    job_id = waiting.json()["id"]
    for node, token in tokens.items():
        assert beat(node, token, "subprocess").status_code == 200
    ran = submit(alice_api, name="with-command", command="python train.py").json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        service.run_round()
    assert Job.objects.get(pk=ran).status == Job.Status.RUNNING  # the cluster is not blocked
    assert Job.objects.get(pk=job_id).status == Job.Status.PENDING
    assert not Placement.objects.filter(job_id=job_id).exists()
    assert {m["job_id"] for m in sent} == {ran}
    shown = alice_api.get(f"{JOBS_URL}{job_id}/").json()
    assert shown["status"] == "pending" and shown["pending_reason"] == HELD
    assert submit(alice_api).status_code == 400  # a new one is refused outright, as before
    for node, token in tokens.items():  # the agents restarted with --emulate
        beat(node, token, "emulated")
    with django_capture_on_commit_callbacks(execute=True):
        service.run_round()
    assert Job.objects.get(pk=job_id).status == Job.Status.RUNNING


def test_a_node_not_yet_declared_does_not_release_a_held_job(
    alice_api: APIClient,
    tokens: dict[str, str],
    sent: list[dict[str, Any]],
    django_capture_on_commit_callbacks: Any,
) -> None:
    """A fresh-user trial's case: node-00's agent runs processes, node-01 was just registered and its
    agent has not sent a heartbeat. The job without a command used to be placed (on node-00's idle
    GPU) and failed at once ("the placement has no command"); it waits, saying why."""
    waiting = submit(alice_api, name="no-command").json()["id"]  # accepted: nothing known yet
    assert beat("node-00", tokens["node-00"], "subprocess").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        service.run_round()
    job = Job.objects.get(pk=waiting)
    assert job.status == Job.Status.PENDING and not Placement.objects.filter(job_id=waiting).exists()
    assert alice_api.get(f"{JOBS_URL}{waiting}/").json()["pending_reason"] == HELD
    assert sent == []
