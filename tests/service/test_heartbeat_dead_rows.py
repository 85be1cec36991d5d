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
from tests.service.dead_rows import job_pages_fetched, live_and_end

pytestmark = [pytest.mark.postgres]

ENDED_JOBS = 1_000
GPUS = 20  # one scan per GPU of the node in the old plan: the multiplier it had in the runs


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
    live_and_end([job.pk for job in ended])  # one after the other on the whole node
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
