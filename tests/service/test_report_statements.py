"""Statements an agent's report sends, second pass (docs/PERFORMANCE.md §10, "Follow-up: a job's
reports in fewer statements"): an event's placement rows and the floor's ``placed`` event in one
statement, a heartbeat's jobs' ``placed`` events in one, and a run's first output chunk without
a savepoint or a second write of its run row.

Hand counts (statements inside the item, besides the item's own transaction — its BEGIN and
COMMIT, a savepoint and its release inside a test's transaction — as ``CaptureQueriesContext``
sees them): a ``started`` event locks its job (1), reads its placement rows with the floor (1),
asks whether this start is a repeat (1), inserts the event (1) and writes the job's progress (1)
when it changes: 5 for a resumed job's start, 4 for a first start at 0 iterations before any
measurement (its progress columns already hold that) — 6 before, when the ``placed`` event was a
statement of its own. A job's chunks of runs new to the server, however many, lock the job with
the 403/404 answers (1), read the runs (1), insert them with their final lengths (1), read the
job's last chunk (1) and insert the chunks (1): 5 in the job's own transaction
(cluster.joblogs.append_outputs) — 5 per chunk, each in its own transaction, before the chunks
were applied set-wise, and 8 per chunk before that (``get_or_create``'s savepoint, insert and
release, then an UPDATE of the same row).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cluster.joblog_models import JobLogChunk, JobLogRun
from cluster.models import Job, Tenant
from tests.service.test_agent_batch import GPUS, placed
from tests.service.test_report_cost import BASE, send


def test_a_first_started_event_costs_four_statements_a_resumed_one_five(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)["node-00"]
    token = fleet["node-00"][1]

    def started(count: int, first: int, done: float = 0) -> list[dict[str, Any]]:
        return [
            {"job_id": j.pk, **BASE, "iter_time_s": None, "memory_mb": None, "event": "started"}
            | {"iterations_done": done}
            for j in jobs[first : first + count]
        ]

    one = send(token, capture, events=started(1, 0))
    two = send(token, capture, events=started(2, 1))
    assert len(two) - len(one) == 2 + 4  # the item's own transaction (a savepoint here), then its 4
    Job.objects.filter(pk=jobs[3].pk).update(iterations_done=2.0)  # a resumed job
    resumed = send(token, capture, events=started(1, 3, done=7))
    assert len(resumed) - len(one) == 1  # its progress written: 2 -> 7 iterations
    assert Job.objects.get(pk=jobs[3].pk).iterations_done == 7.0
    # no statement reads the ``placed`` event alone: it rides on the placement rows' read
    alone = [
        q["sql"]
        for q in two
        if '"cluster_jobevent"' in q["sql"]
        and "'placed'" in q["sql"]
        and '"cluster_placement"' not in q["sql"]
    ]
    assert alone == []
    assert Job.objects.filter(pk__in=[j.pk for j in jobs[:4]], status="running").count() == 4


def test_a_heartbeat_reads_its_jobs_placed_events_in_one_statement(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)["node-00"]
    token = fleet["node-00"][1]
    running = [{"job_id": j.pk, "generation": 1, "iterations_done": 5} for j in jobs]
    queries = send(token, capture, heartbeat={"gpus": GPUS, "running": running})
    events = [q["sql"] for q in queries if '"cluster_jobevent"' in q["sql"]]
    assert len(events) == 1 and "MAX(" in events[0]
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("iterations_done", flat=True)) == {
        5
    }


def test_a_new_runs_first_chunks_cost_five_statements_a_job_and_keep_their_values(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)["node-00"]
    token = fleet["node-00"][1]

    def chunk(job: Job, offset: int, data: str, eof: bool) -> dict[str, Any]:
        return {"job_id": job.pk, "run": "node-00/g1", "offset": offset, "data": data, "eof": eof}

    one = send(token, capture, logs=[chunk(jobs[0], 0, "a\n", False)])
    two = send(token, capture, logs=[chunk(jobs[1], 0, "b\n", False), chunk(jobs[2], 3, "cc\n", True)])
    # a job's chunks: their own transaction (a savepoint here) and 5 statements; two jobs, twice
    chunks_of = [q for q in one if "joblog" in q["sql"] or '"cluster_job" J' in q["sql"]]
    assert len(chunks_of) == 5
    assert len(two) - len(one) == 2 + 5
    assert sum(q["sql"].startswith("SAVEPOINT") for q in two) == 2  # one a job, no other
    # the new run's row holds what an UPDATE after the insert wrote before: its length, its eof
    runs = {r.job_id: (r.received, r.eof, r.node) for r in JobLogRun.objects.all()}
    assert runs == {
        jobs[0].pk: (2, False, "node-00"),
        jobs[1].pk: (2, False, "node-00"),
        jobs[2].pk: (6, True, "node-00"),  # 3 characters missed, then 3 received
    }
    text = JobLogChunk.objects.get(job_id=jobs[2].pk).text
    assert text == "[sharewise: 3 characters of output were not received]\ncc\n"
    # the run's next chunk goes on from there
    send(token, capture, logs=[chunk(jobs[0], 2, "d\n", True)])
    assert JobLogRun.objects.filter(job_id=jobs[0].pk).values_list("received", "eof").get() == (4, True)


def test_write_progress_writes_each_jobs_own_value_and_nothing_else(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduling.service.heartbeats import write_progress

    jobs = placed(tenant, django_capture_on_commit_callbacks)["node-00"]
    first, second, other = jobs[0], jobs[1], jobs[2]
    first.iterations_done, second.iterations_done = 12.5, 40.0
    with CaptureQueriesContext(connection) as seen:
        write_progress([first, second])
        write_progress([])  # nothing: no statement
    assert len(seen.captured_queries) == 1
    done = dict(
        Job.objects.filter(pk__in=[first.pk, second.pk, other.pk]).values_list("pk", "iterations_done")
    )
    assert done == {first.pk: 12.5, second.pk: 40.0, other.pk: 0.0}
