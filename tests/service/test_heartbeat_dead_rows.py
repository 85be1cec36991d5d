"""A heartbeat reads what its node runs, not the versions of every job that ever ran
(scheduling/service/heartbeats.py, docs/PERFORMANCE.md §10).

A job's row gets a new version at each status change; the old version's entry in the
``job_status`` index stays until VACUUM. The heartbeat's "jobs placed here and running" query
filtered on the job's status, so the planner (PostgreSQL without statistics, as on a server whose
autovacuum is off or has not run yet) could start from that index, once for each of the node's
GPUs, and visit every heap page holding a version that was once ``running``: 61 ms a heartbeat at
15,000 ended jobs, growing with them, against 0.2 ms from the node's active placement rows.

The test counts the ``cluster_job`` pages one heartbeat visits (PostgreSQL's per-transaction
counter ``pg_stat_get_xact_blocks_fetched``) with 1,000 ended jobs behind it: a handful (6) — the
job the node runs and its progress write — where the old query read 1,225. PostgreSQL only (SQLite has no such
counter, nor that index's planner).
"""

from __future__ import annotations

import pytest
from django.db import connection

from cluster.models import GPU, Job, Node, Placement, Tenant
from scheduling.service.heartbeats import record_heartbeat
from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.postgres]

ENDED_JOBS = 1_000
GPUS = 20  # one scan per GPU of the node in the old plan: the multiplier it had in the runs


#: One job's life (its id in each %s), as the service writes it: placed on every GPU of the node
#: (the job running), progress, ended (the rows inactive, the job succeeded).
LIFE = (
    "INSERT INTO cluster_placement (job_id, gpu_id, generation, sub_batch, slot, active, created_at)"
    " SELECT %s, g.id, 1, 3, 0, true, now() FROM cluster_gpu g",
    "UPDATE cluster_job SET status = 'running', started_at = now() WHERE id = %s",
    "UPDATE cluster_job SET iterations_done = 5 WHERE id = %s",
    "UPDATE cluster_placement SET active = false, ended_at = now() WHERE job_id = %s",
    "UPDATE cluster_job SET status = 'succeeded', finished_at = now() WHERE id = %s",
)


def job_pages_fetched() -> int:
    """Pages of ``cluster_job`` read (from the buffer cache or disk) so far in this transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_blocks_fetched('cluster_job'::regclass)")
        return int(cursor.fetchone()[0])


def test_a_heartbeat_reads_a_fixed_number_of_job_pages_whatever_ended_before(db: None) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...)")
    node, _ = Node.register("node-00", GPUS, 16_000, "v100")
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=GPUS)
    gpus = list(GPU.objects.filter(node=node).order_by("index"))
    ended = Job.objects.bulk_create(
        Job(tenant=tenant, name=f"e{i}", model="resnet50", batch_size=64, iterations=10, gpus=GPUS)
        for i in range(ENDED_JOBS)
    )
    # one after the other on the whole node, each step a new version of the rows; plain SQL
    # (10,000 statements through the ORM took 30 s)
    with connection.cursor() as cursor:
        for job in ended:
            for sql in LIFE:
                cursor.execute(sql, [job.pk])
    live = Job.objects.create(
        tenant=tenant, name="live", model="resnet50", batch_size=64, iterations=10, gpus=1, status="running"
    )
    Placement.objects.create(job=live, gpu=gpus[0], generation=1, sub_batch=64, active=True)
    healthy = [{"index": g.index, "uuid": g.uuid, "memory_mb": 16_000, "healthy": True} for g in gpus]

    start = job_pages_fetched()
    answer = record_heartbeat(node, healthy, [{"job_id": live.pk, "generation": 1, "iterations_done": 4}])
    pages = job_pages_fetched() - start

    assert answer == {"stopped": [], "requeued": []}
    assert Job.objects.get(pk=live.pk).iterations_done == 4
    # the running job looked up and its progress written: a few pages (index pages included);
    # the old plan read every page holding a once-running version, for each of the 20 GPUs
    assert pages <= 20, pages
