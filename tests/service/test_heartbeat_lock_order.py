"""A heartbeat (scheduling/service/heartbeats.py ``record_heartbeat``) against a round
(scheduling/service/persist.py) writing the same node's jobs: the lock orders of docs/LOCKS.md.
PostgreSQL only (SQLite takes the whole database's lock).

- A heartbeat requeued the jobs it no longer lists, then wrote the progress of those it lists:
  two groups of job rows, each in its own statement, so a job of the first group with a higher
  key than one of the second was locked before it; a round preempting both (ascending key)
  deadlocked with it.
- A heartbeat wrote its GPUs first: a GPU's new NVML uuid (a column with a unique index, so its
  UPDATE takes the row's strongest lock) then held the GPU row while the heartbeat waited for a
  job the round held; the round, inserting a placement on that GPU (a foreign key: ``FOR KEY
  SHARE`` on the GPU row), waited for the heartbeat.

Now a heartbeat locks its jobs in one statement, by ascending key, and writes its GPUs last.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from cluster.models import GPU, Job, Node
from scheduling import service
from scheduling.core import types as core
from scheduling.service.heartbeats import heartbeat_interval_s
from tests.service.lock_threads import (  # sent: the fixture, from any thread
    interleave,
    kinds,
    node_and_jobs,
    sent_from_any_thread,  # noqa: F401
    start,
)
from tests.service.test_rounds import FixedPolicy

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: PostgreSQL only"),
    pytest.mark.django_db(transaction=True),
]


def gpus_of(node: Node, **uuids: str) -> list[dict[str, Any]]:
    """The heartbeat's GPU list: each GPU healthy, with its stored uuid unless ``uuids`` gives
    one (``g1="GPU-…"``)."""
    return [
        {"index": g.index, "uuid": uuids.get(f"g{g.index}", g.uuid), "memory_mb": 16_000, "healthy": True}
        for g in GPU.objects.filter(node=node).order_by("index")
    ]


def test_a_heartbeat_requeueing_one_job_and_advancing_another_does_not_deadlock_with_a_round(
    sent: list[Any],
) -> None:
    node, (old, new) = node_and_jobs(2)
    service.run_round(policy=FixedPolicy(starts=(start(old.pk, 0), start(new.pk, 1))))
    # the heartbeat lists the older job (progress 5) and not the newer one, which was missed once
    # already, an interval ago: it is requeued (the agent lost it)
    later = timezone.now() + timedelta(seconds=10 * heartbeat_interval_s())
    cache.set(f"sharewise:missing:{node.pk}", {new.pk: later.timestamp() - 2 * heartbeat_interval_s()})
    running = [{"job_id": old.pk, "generation": 1, "iterations_done": 5.0}]

    def hold() -> None:  # any transaction holding the older job's row for a moment
        Job.objects.select_for_update().filter(pk=old.pk).first()

    def preempt() -> None:  # queues for the older job first
        stop = (core.Preempt(old.pk, "test"), core.Preempt(new.pk, "test"))
        service.run_round(policy=FixedPolicy(preemptions=stop))

    def heartbeat() -> None:
        service.record_heartbeat(node, gpus_of(node), running, now=later)

    errors = interleave(hold, preempt, heartbeat)
    assert not errors, [repr(e) for e in errors]
    # the round queued first and preempted both; the heartbeat then found the newer job no longer
    # running (not requeued) and the older one's report of a run already stopped (generation 1
    # below the stop's 2): nothing to write
    for job in (old, new):
        job.refresh_from_db()
        assert (job.status, job.iterations_done) == (Job.Status.PENDING, 0.0)
        assert kinds(job) == ["placed", "preempted"]


def test_a_heartbeat_with_a_new_gpu_uuid_does_not_deadlock_with_a_round_starting_on_that_gpu(
    sent: list[Any],
) -> None:
    node, (old, waiting) = node_and_jobs(2)
    service.run_round(policy=FixedPolicy(starts=(start(old.pk, 0),)))
    running = [{"job_id": old.pk, "generation": 1, "iterations_done": 5.0}]
    uuid = "GPU-00000000-0000-0000-0000-000000000001"  # node-00:1 as NVML names it

    def hold() -> None:  # any transaction holding the running job's row for a moment
        Job.objects.select_for_update().filter(pk=old.pk).first()

    def round_() -> None:  # preempts the running job, starts the waiting one on node-00:1
        decided = FixedPolicy(starts=(start(waiting.pk, 1),), preemptions=(core.Preempt(old.pk, "test"),))
        service.run_round(policy=decided)

    def heartbeat() -> None:  # node-00:1's NVML uuid, and the running job's progress
        service.record_heartbeat(node, gpus_of(node, g1=uuid), running)

    errors = interleave(hold, round_, heartbeat)
    assert not errors, [repr(e) for e in errors]
    # the round queued first: preempted the job, started the other on node-00:1; the heartbeat then
    # wrote the progress it read while the run was still placed (5, the most reported), and the uuid
    old.refresh_from_db()
    waiting.refresh_from_db()
    assert (old.status, old.iterations_done, kinds(old)) == (Job.Status.PENDING, 5.0, ["placed", "preempted"])
    assert (waiting.status, kinds(waiting)) == (Job.Status.RUNNING, ["placed"])
    assert GPU.objects.get(node=node, index=1).uuid == uuid
