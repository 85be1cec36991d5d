"""Deterministic interleavings of transactions on PostgreSQL, for the lock-order tests
(docs/LOCKS.md): a *holder* transaction takes one row lock and keeps it while the transactions
under test start one after the other, each reaching its wait for that row (or for the one before
it) before the next begins; then the holder commits, and the order in which they wake is the order
in which they queued. A deadlock among them is detected within ``deadlock_timeout``, lowered to
100 ms in each thread's session.

SQLite has no row locks (a writer takes the whole database): the tests using this skip there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from cluster.models import Job, JobEvent, Node, Tenant
from scheduling import service
from scheduling.core import types as core

#: Seconds between the start of one thread and the next: each has reached its lock wait by then.
PAUSE_S = 0.5


@pytest.fixture(name="sent")
def sent_from_any_thread() -> Iterator[list[dict[str, Any]]]:
    """The messages dispatched, after each commit, from any thread (a test module imports it to
    replace the conftest's ``sent``, which captures the test's own on-commit callbacks only)."""
    messages: list[dict[str, Any]] = []
    service.set_dispatcher(messages.extend)
    yield messages
    service.set_dispatcher(None)


def in_thread(target: Callable[[], object], errors: list[BaseException]) -> threading.Thread:
    """Run ``target`` in a new thread with its own database connection (``deadlock_timeout``
    100 ms), appending what it raises to ``errors``; the thread, started."""

    def run() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SET deadlock_timeout = '100ms'")
            target()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def interleave(hold: Callable[[], object], *steps: Callable[[], object]) -> list[BaseException]:
    """Run ``hold`` in a transaction kept open, then each of ``steps`` in its own thread,
    :data:`PAUSE_S` apart, then commit the holder's transaction and wait for all (at most 20 s
    each). Returns what the threads raised (a deadlock's victim: ``OperationalError``, ``deadlock
    detected``)."""
    errors: list[BaseException] = []
    release = threading.Event()

    def holder() -> None:
        with transaction.atomic():
            hold()
            release.wait(10)

    threads = [in_thread(holder, errors)]
    for step in steps:
        time.sleep(PAUSE_S)
        threads.append(in_thread(step, errors))
    time.sleep(PAUSE_S)
    release.set()
    for thread in threads:
        thread.join(20)
    assert not any(t.is_alive() for t in threads), "a thread is still waiting after 20 s"
    return errors


def start(job_id: int, *gpu_ids: int) -> core.Start:
    """A start of job ``job_id`` on core GPU ids ``gpu_ids`` at its full batch (128)."""
    return core.Start(job_id, tuple(gpu_ids), 128, 1)


def node_and_jobs(count: int) -> tuple[Node, list[Job]]:
    """node-00 (2 GPUs) and ``count`` pending 1-GPU jobs of team-a, oldest (lowest key) first."""
    node, _ = Node.register("node-00", 2, 16_000, "v100")
    tenant = Tenant.create_with_owner("team-a", quota_gpus=8)[0]
    fields = {"model": "resnet50", "batch_size": 128, "iterations": 100, "gpus": 1}
    return node, [Job.objects.create(tenant=tenant, name=f"j{i}", **fields) for i in range(count)]


def kinds(job: Job) -> list[str]:
    """The kinds of the job's events, oldest first."""
    return list(JobEvent.objects.filter(job=job).order_by("at", "id").values_list("kind", flat=True))
