"""A job whose command cannot start on its node, with an error longer than the server takes in a
``reason`` (docs/AGENT.md §2): the agent's ``failed`` event lands — by the batch report and by the
single endpoint alike — and the job ends ``failed`` instead of staying ``running`` and being
placed again and again."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import pytest

from agent.core import Agent
from agent.executors import SubprocessExecutor
from agent.gpus import declared_gpus
from agent.messages import MAX_REASON_CHARS, REASON_CUT, JobEventReport
from cluster.agent_serializers import AgentEventSerializer
from cluster.models import Job, Tenant
from tests.service.test_agent_api import agent, events_url, place

BATCH_URL = "/api/v1/agent/batch/"


def failed_to_start(job: Job, command: str) -> JobEventReport:
    """The ``failed`` event of node-00's agent told to run ``job`` with ``command``."""
    node = Agent("node-00", declared_gpus("node-00", 4, 16_000), partial(SubprocessExecutor), time.monotonic)
    node.apply(
        {
            "node": "node-00",
            "job_id": job.pk,
            "generation": 1,
            "action": "start",
            "gpu_indices": [0],
            "sub_batch": 128,
            "accum_steps": 1,
            "batch_size": 128,
            "iterations": 1000,
            "iter_time_s": 0.5,
            "command": command,
        }
    )
    [event] = node.step()
    assert event.event == "failed"
    return event


@pytest.mark.parametrize("command", ["a" * 1200, "\u2603" * 4096], ids=["1200-ascii", "4096-snowmen"])
@pytest.mark.parametrize("way", ["batch", "single"])
def test_an_unstartable_long_command_fails_the_job_with_a_shortened_reason(
    fleet: dict, tenant: Tenant, django_capture_on_commit_callbacks: Callable, command: str, way: str
) -> None:
    job = place(tenant, django_capture_on_commit_callbacks)
    event = failed_to_start(job, command)
    assert event.reason.startswith(f"cannot start '{command[:50]}")
    assert len(event.reason) == MAX_REASON_CHARS and event.reason.endswith(REASON_CUT)
    client = agent(fleet["node-00"][1])
    with django_capture_on_commit_callbacks(execute=True):
        if way == "batch":
            body = {"node": "node-00", "events": [{"job_id": job.pk, **event.payload()}]}
            answer = client.post(BATCH_URL, body, format="json")
            assert answer.status_code == 200, answer.content[:300]
            assert answer.json()["events"][0]["code"] == 200
        else:
            answer = client.post(events_url(job.pk), event.payload(), format="json")
            assert answer.status_code == 200, answer.content[:300]
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert job.failure_reason == event.reason


def test_the_server_takes_the_longest_reason_the_agent_sends_and_no_longer() -> None:
    body = {"generation": 1, "event": "failed", "iterations_done": 0}
    assert AgentEventSerializer(data={**body, "reason": "x" * MAX_REASON_CHARS}).is_valid()
    assert not AgentEventSerializer(data={**body, "reason": "x" * (MAX_REASON_CHARS + 1)}).is_valid()
