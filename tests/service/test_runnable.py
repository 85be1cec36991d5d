"""Only runnable jobs are accepted: agents declare their executor in heartbeats, and a job without
a command is refused (400) where every node that declared runs real processes (cluster.runnable)."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from cluster.models import Node
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
