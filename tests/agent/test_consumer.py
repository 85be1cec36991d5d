"""The Celery task hands placements to the right agent; with Redis, end to end through a worker."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from agent.consumer import make_app, register_apply_task
from agent.core import Agent
from agent.messages import TASK_NAME, queue_name
from tests.conftest import skip_or_fail

from .conftest import NODE, placement


def test_task_applies_the_placement_to_its_node(agent: Agent) -> None:
    app = make_app("memory://")
    task = register_apply_task(app, {NODE: agent})
    assert task.name == "sharewise.apply_placement"
    assert task.apply(kwargs=placement(generation=1)).get() is True
    assert task.apply(kwargs=placement(generation=1)).get() is False  # redelivered: applied once
    assert task.apply(kwargs=placement(node="node-07")).get() is False  # not served here
    assert agent.running == {1: 1}


def test_app_accepts_only_json() -> None:
    app = make_app("memory://")
    assert app.conf.accept_content == ["json"] and app.conf.task_acks_late is True


TEST_QUEUE = queue_name(f"{NODE}-agent-test")


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The Redis to use (``$REDIS_URL``, else database 15 of the local one), without this test's keys."""
    url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        import redis

        client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
        client.ping()
    except Exception as exc:  # any failure to reach it means "no Redis here"
        skip_or_fail(f"Redis is not reachable at {url} ({exc})")
    # kombu keeps a queue as a list under its name, plus binding sets naming it.
    keys = [TEST_QUEUE, f"_kombu.binding.{TEST_QUEUE}", f"_kombu.binding_permanent.{TEST_QUEUE}"]
    client.delete(*keys)
    yield url
    client.delete(*keys)


@pytest.mark.redis
def test_placement_sent_by_the_server_reaches_the_agent_through_redis(agent: Agent, redis_url: str) -> None:
    from celery.contrib.testing.worker import start_worker

    node_queue = TEST_QUEUE
    app = make_app(redis_url)
    register_apply_task(app, {NODE: agent})
    # The server's side of the contract (docs/AGENT.md): send_task by name to the node's queue.
    server = make_app(redis_url)
    with start_worker(app, pool="solo", queues=[node_queue], perform_ping_check=False, shutdown_timeout=5):
        server.send_task(TASK_NAME, kwargs=placement(generation=4), queue=node_queue)
        server.send_task(TASK_NAME, kwargs=placement(generation=4), queue=node_queue)  # duplicate
        # One consumer, one at a time: once job 2 runs, both messages of job 1 were applied.
        server.send_task(TASK_NAME, kwargs=placement(job_id=2, generation=1), queue=node_queue)
        deadline = time.monotonic() + 5.0
        while 2 not in agent.running and time.monotonic() < deadline:
            time.sleep(0.02)
    assert agent.running == {1: 4, 2: 1}
    assert [(e.job_id, e.event) for e in agent.step(0.0)] == [(1, "started"), (2, "started")]
