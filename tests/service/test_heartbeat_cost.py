"""A heartbeat's cost does not grow with the jobs it lists (scheduling/service/heartbeats.py): the
progress of all its running jobs is read in a fixed number of queries (it was five per job, and a
node of the end-to-end runs lists up to twenty jobs every second), and each job still keeps the
largest progress, an old run's row still changes nothing."""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.models import Job, Tenant
from tests.service.test_agent_api import beat
from tests.service.test_agent_batch import placed


def test_a_heartbeats_queries_do_not_grow_with_its_jobs(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)["node-00"]  # 4 jobs on node-00
    token = fleet["node-00"][1]

    def queries(rows: list[dict]) -> int:
        with CaptureQueriesContext(connection) as seen:
            assert beat(token, "node-00", capture, running=rows).status_code == 200
        return len(seen.captured_queries)

    row = {"generation": 1, "iterations_done": 0}  # no progress: nothing to write
    one = queries([{"job_id": jobs[0].pk, **row}])
    four = queries([{"job_id": j.pk, **row} for j in jobs])
    assert four == one

    # progress: the maximum is kept; a row of an older generation than the floor changes nothing
    rows = [
        {"job_id": jobs[0].pk, "generation": 1, "iterations_done": 300},
        {"job_id": jobs[1].pk, "generation": 1, "iterations_done": 20},
        {"job_id": jobs[2].pk, "generation": 0, "iterations_done": 900},  # an old run's
        {"job_id": jobs[3].pk, "generation": 1, "iterations_done": 5000},  # past its total
    ]
    Job.objects.filter(pk=jobs[1].pk).update(iterations_done=50)
    assert beat(token, "node-00", capture, running=rows).status_code == 200
    done = dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("pk", "iterations_done"))
    assert [done[j.pk] for j in jobs] == [300, 50, 0, 1000]
