"""A round's snapshot reads its jobs' requeue times and own samples by their ids, not through
the versions of every job that ever ran (scheduling/service/snapshot.py, docs/PERFORMANCE.md §10).

Two statements of the snapshot were joined to the jobs on their status: the pending jobs' latest
``preempted``/``requeued`` event (``requeue_times``) and the pending and running jobs' exclusive
samples (``job_stats``). PostgreSQL without statistics (autovacuum off, or not run yet) started
both from the ``job_status`` index, whose entries for every row version once pending or running
stay until VACUUM, so each read more pages with every job that had ended (×2–4 over the
15,000-job run, 40 and 27 ms a round at its end). They are asked by the ids of the jobs the
snapshot has just read now.

The test counts the pages (heap and index, every table: ``pg_stat_get_xact_blocks_fetched``)
each of the two statements reads with 1,000 ended jobs behind the round, which ran and left their
events and samples as the service leaves them: a handful each now, where the join read one page
or more per ended job. The snapshot's answer is checked by hand: the requeued job waits from its
latest requeue, the measured jobs run at their own geometric mean. PostgreSQL only (SQLite has
no such counter, nor that planner).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest
from django.db import connection

from cluster.models import GPU, Job, JobEvent, Node, Placement, Tenant
from scheduling.models import JobIterTime
from scheduling.service.snapshot import consistent_view, load_state
from tests.conftest import skip_or_fail
from tests.service.dead_rows import live_and_end, pages_per_statement

pytestmark = [pytest.mark.postgres]

ENDED_JOBS = 1_000
GPUS = 8
#: Most pages either statement may read: an index descent and a heap page or two per job asked
#: (three jobs here), whatever ended before.
MOST_PAGES = 30
#: The history each ended job leaves (one in ten was preempted and put back once before).
ENDED_EVENTS = ("submitted", "placed", "started", "succeeded")
PREEMPTED_EVENTS = ("preempted", "requeued")
T_PREEMPTED = datetime(2030, 1, 2, 3, 0, 0, tzinfo=UTC)
T_REQUEUED = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


def ended_history(job_ids: list[int]) -> None:
    """The ended jobs' events and exclusive samples (one each), in three statements."""
    with connection.cursor() as cursor:
        for kinds, ids in ((ENDED_EVENTS, job_ids), (PREEMPTED_EVENTS, job_ids[::10])):
            cursor.execute(
                "INSERT INTO cluster_jobevent (job_id, kind, at, message, data)"
                " SELECT j, k, now(), '', '{}'::jsonb"
                " FROM unnest(%s::bigint[]) AS j, unnest(%s::text[]) AS k",
                [ids, list(kinds)],
            )
        cursor.execute(
            "INSERT INTO scheduling_jobitertime (job_id, count, weight, mean_log, var_log, updated_at)"
            " SELECT j, 1, 1.0, 0.0, 0.0, now() FROM unnest(%s::bigint[]) AS j",
            [job_ids],
        )


def test_the_snapshot_reads_requeue_times_and_samples_by_its_jobs_ids(db: None) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...)")
    node, _ = Node.register("node-00", GPUS, 16_000, "v100")
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=GPUS)
    ended = Job.objects.bulk_create(
        Job(tenant=tenant, name=f"e{i}", model="resnet50", batch_size=64, iterations=10, gpus=GPUS)
        for i in range(ENDED_JOBS)
    )
    live_and_end([job.pk for job in ended])  # one after the other on the whole node
    ended_history([job.pk for job in ended])

    def job(name: str, **fields: object) -> Job:
        return Job.objects.create(
            tenant=tenant, name=name, model="resnet50", batch_size=64, iterations=100, gpus=1, **fields
        )

    # ran before, preempted, put back: waits from its latest requeue; 2 samples of ln 1.5
    requeued = job("requeued", started_at=T_PREEMPTED)
    for kind, at in (("placed", T_PREEMPTED), ("preempted", T_PREEMPTED), ("requeued", T_REQUEUED)):
        JobEvent.objects.create(job=requeued, kind=kind, at=at)
    JobIterTime.objects.create(job=requeued, count=2, weight=2.0, mean_log=math.log(1.5), var_log=0.0)
    # running on GPU 0, measured at exp(ln 0.8) = 0.8 s
    running = job("running", status=Job.Status.RUNNING, started_at=T_REQUEUED)
    gpu = GPU.objects.get(node=node, index=0)
    Placement.objects.create(job=running, gpu=gpu, generation=1, sub_batch=64, active=True)
    JobIterTime.objects.create(job=running, count=3, weight=3.0, mean_log=math.log(0.8), var_log=0.0)
    fresh = job("fresh")  # never ran: no requeue time, no samples

    with consistent_view(), pages_per_statement() as seen:
        state = load_state()

    assert set(state.jobs) == {requeued.pk, running.pk, fresh.pk}
    assert state.jobs[requeued.pk].queued_since == pytest.approx(T_REQUEUED.timestamp(), abs=1e-3)
    assert state.jobs[fresh.pk].queued_since is None
    assert state.jobs[requeued.pk].iter_time_s == pytest.approx(1.5)
    assert state.jobs[running.pk].iter_time_s == pytest.approx(0.8)
    assert state.jobs[fresh.pk].iter_time_s not in (pytest.approx(1.5), pytest.approx(0.8))
    pages = {
        table: [n for sql, n in seen if f'FROM "{table}"' in sql]
        for table in ("cluster_jobevent", "scheduling_jobitertime")
    }
    # one statement each, a few pages each; the join on the status read every page holding a
    # version of an ended job that was once pending (or running)
    assert all(len(counts) == 1 and counts[0] <= MOST_PAGES for counts in pages.values()), pages
