"""A report's output chunks must not hold two jobs' rows at once: the round's preemption UPDATE
(scheduling/service/persist.py, ``Job.objects.filter(pk__in=preempted, ...).update(...)``) locks
running jobs in the order PostgreSQL scans them, by ascending key, and the chunks applied in one
transaction for the whole report (newest submission first) deadlocked with it. Now each job's
chunks have their own transaction (cluster.joblogs.append_outputs), holding that job's row only,
as each chunk's did before the set-wise chunks: it is part of no lock cycle.

The interleaving is made deterministic by a third transaction holding the older job's row: the
UPDATE queues for it first, the chunks lock the newer job and queue behind; when the holder
commits, the UPDATE gets the older row and waits for the newer one, which the chunks hold while
they wait for the older one. PostgreSQL only (SQLite takes the whole database's lock).
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from cluster.joblogs import OutputChunk, append_outputs
from cluster.models import Job, Node, Tenant
from tests.service.lock_threads import in_thread

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: PostgreSQL only")


@pytest.mark.django_db(transaction=True)
def test_chunks_of_two_jobs_do_not_deadlock_with_the_rounds_preemption_update() -> None:
    node, _ = Node.register("node-00", 2, 16_000, "v100")
    tenant = Tenant.create_with_owner("team-a", quota_gpus=8)[0]
    old, new = (
        Job.objects.create(
            tenant=tenant, name=f"j{i}", model="resnet50", batch_size=128, iterations=10, gpus=1
        )
        for i in range(2)
    )
    errors: list[BaseException] = []
    release = threading.Event()

    def holder() -> None:  # any transaction holding the older job's row for a moment
        with transaction.atomic():
            Job.objects.select_for_update().filter(pk=old.pk).first()
            release.wait(10)

    def preemption() -> None:  # the round's statement (persist.py), ascending key order
        with transaction.atomic():
            Job.objects.filter(pk__in=[old.pk, new.pk]).update(iterations_done=1.0)

    def chunks() -> None:  # the node's report: one chunk of each job
        append_outputs(
            node, [OutputChunk(old.pk, "node-00/g1", 0, "a"), OutputChunk(new.pk, "node-00/g1", 0, "b")]
        )

    threads = [in_thread(holder, errors)]
    time.sleep(0.5)
    threads.append(in_thread(preemption, errors))
    time.sleep(0.5)
    threads.append(in_thread(chunks, errors))
    time.sleep(0.5)
    release.set()
    for thread in threads:
        thread.join(20)
    assert not errors, [repr(e) for e in errors]
