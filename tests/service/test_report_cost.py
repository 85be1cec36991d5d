"""What an agent's report costs in queries (docs/PERFORMANCE.md §10): each event reads its job's
placement rows once (scheduling/service/placement_facts.py) and answers every placement question
from them exactly as the queries it replaces; a heartbeat writes the progress of all its jobs in
one statement; an output chunk's refusal is read with its job's lock.

The counts are of the statements each item sends (hand count below), so they fail on the code
before: a ``started`` event asked the placement table 8 times (the 403 check, the window's
aggregate, the nodes holding the job twice, the sub-batch, the rows and the latest generation for
the learning, the partners beside it), a heartbeat wrote one UPDATE per job that advanced, and a
chunk read its job three times (exists, placed here, lock).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import Job, Node, Placement, Tenant
from scheduling import service
from scheduling.service.generations import latest_generation
from scheduling.service.jobs import job_nodes
from scheduling.service.placement_facts import job_placements, jobs_placements
from tests.service.generation_queries import generation_window, latest_placement_nodes
from tests.service.test_agent_api import agent
from tests.service.test_agent_batch import BATCH_URL, GPUS, placed

BASE = {"generation": 1, "iter_time_s": 0.5, "reason": "", "memory_mb": 3000.0, "failure_kind": ""}


def send(token: str, capture: Callable, node: str = "node-00", **body: Any) -> list[dict[str, Any]]:
    """POST one batch report of ``node``; the statements it sent."""
    report = {"node": node, "logs": [], "events": [], "heartbeat": None, **body}
    with CaptureQueriesContext(connection) as seen, capture(execute=True):
        answer = agent(token).post(BATCH_URL, report, format="json")
    assert answer.status_code == 200, answer.content
    assert all(i["code"] == 200 for i in answer.json()["events"] + answer.json()["logs"])
    return seen.captured_queries


def on_placements(queries: list[dict[str, Any]]) -> int:
    return sum('"cluster_placement"' in q["sql"] for q in queries)


def test_each_event_asks_the_placement_table_a_fixed_number_of_times(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)["node-00"]
    token = fleet["node-00"][1]

    def events(kind: str, done: float, count: int) -> list[dict[str, Any]]:
        return [{"job_id": j.pk, **BASE, "event": kind, "iterations_done": done} for j in jobs[:count]]

    # started: the job's rows (1) and the partners beside it for the learning (1), per event
    assert on_placements(send(token, capture, events=events("started", 0, 1))) == 2
    assert on_placements(send(token, capture, events=events("started", 0, 4)[1:])) == 3 * 2
    # progress: the same two
    assert on_placements(send(token, capture, events=events("progress", 10, 4))) == 4 * 2
    # finished: those two and the release's two (the partners on its GPUs, ending the rows)
    assert on_placements(send(token, capture, events=events("finished", 1000, 2))) == 2 * 4
    assert list(
        Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk").values_list("status", flat=True)
    ) == [
        "succeeded",
        "succeeded",
        "running",
        "running",
    ]


def test_a_heartbeat_writes_the_progress_of_all_its_jobs_in_one_statement(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)["node-00"]
    token = fleet["node-00"][1]

    def beat(done: float, count: int) -> list[dict[str, Any]]:
        running = [{"job_id": j.pk, "generation": 1, "iterations_done": done} for j in jobs]
        # jobs past ``count`` report no progress (0 is not above what they have)
        for row in running[count:]:
            row["iterations_done"] = 0
        return send(token, capture, heartbeat={"gpus": GPUS, "running": running})

    one = beat(10, 1)  # one job advances
    four = beat(20, 4)  # four do
    assert len(four) == len(one)
    updates = [q["sql"] for q in four if q["sql"].startswith('UPDATE "cluster_job"')]
    assert len(updates) == 1
    done = dict(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("pk", "iterations_done"))
    assert [done[j.pk] for j in jobs] == [20, 20, 20, 20]
    # a ready node's heartbeat without items moves its time in one statement (the beat's own)
    assert sum(q["sql"].startswith('UPDATE "cluster_node"') for q in four) == 1
    # a report with nothing in it (an orders poll) is still a sign of life
    old = timezone.now() - timedelta(seconds=100)
    Node.objects.filter(name="node-00").update(last_heartbeat=old)
    with capture(execute=True):
        answer = agent(token).post(BATCH_URL, {"node": "node-00", "after": 0}, format="json")
    assert answer.status_code == 200
    heard = Node.objects.get(name="node-00").last_heartbeat
    assert heard is not None and heard > old + timedelta(seconds=99)


def test_a_reports_output_chunks_cost_seven_statements_however_many(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    by_node = placed(tenant, capture)
    job, other = by_node["node-00"][0], by_node["node-01"][0]
    token = fleet["node-00"][1]

    def chunks(*pieces: tuple[int, str]) -> list[dict[str, Any]]:
        return [
            {"job_id": job.pk, "run": "node-00/g1", "offset": o, "data": d, "eof": False} for o, d in pieces
        ]

    send(token, capture, logs=chunks((0, "a\n")))  # the run's row exists from here on
    one = send(token, capture, logs=chunks((2, "b\n")))
    two = send(token, capture, logs=chunks((4, "c\n"), (6, "d\n")))
    # for all of a job's chunks in the report (cluster.joblogs.append_outputs, a transaction a
    # job): savepoint, the job locked with the 403/404 answers, its runs, its last chunk, the
    # insert, the runs' update, release — 7, whatever the number of its chunks (7 per chunk
    # before); besides, the node's token and the note that it was heard from
    assert len(one) == 2 + 7
    assert len(two) == len(one)
    locks = [q["sql"] for q in one if '"cluster_job"' in q["sql"]]
    assert len(locks) == 1 and "EXISTS" in locks[0]
    # refusals keep their status: a job never placed here, an unknown one
    report = {"node": "node-00", "logs": chunks((8, "e\n"))}
    report["logs"] += [
        {"job_id": other.pk, "run": "x", "offset": 0, "data": "z", "eof": False},
        {"job_id": 10**9, "run": "x", "offset": 0, "data": "z", "eof": False},
    ]
    with capture(execute=True):
        body = agent(token).post(BATCH_URL, report, format="json").json()
    assert [i["code"] for i in body["logs"]] == [200, 403, 404]
    assert body["logs"][0]["received"] == 10


def test_one_read_of_the_rows_answers_as_the_queries_it_replaces(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """Reference: the per-question functions, over jobs running, finished, requeued, placed
    again (a second generation, its floor from the new ``placed`` event), a gang over both nodes
    and a job never placed."""
    capture = django_capture_on_commit_callbacks
    gang = Job.objects.create(
        tenant=tenant, name="gang", model="resnet50", batch_size=128, iterations=10, gpus=6
    )
    by_node = placed(tenant, capture, 2)
    small = [j for jobs in by_node.values() for j in jobs if j.pk != gang.pk]
    waiting = Job.objects.create(
        tenant=tenant, name="w", model="resnet50", batch_size=128, iterations=10, gpus=8
    )
    nodes = list(Node.objects.all())
    every = [gang.pk, waiting.pk, *(j.pk for j in small)]

    def check() -> None:
        many = jobs_placements(every)  # the heartbeat's read of many jobs: the same facts
        assert many == {pk: job_placements(pk) for pk in every if job_placements(pk).rows}
        for pk in every:
            facts = job_placements(pk)
            assert facts.window() == generation_window(pk)
            assert facts.latest() == latest_generation(pk)
            assert facts.active_nodes() == job_nodes(pk)
            assert facts.latest_nodes() == latest_placement_nodes(pk)
            for node in nodes:
                assert (
                    facts.placed_on(node.pk) == Placement.objects.filter(job_id=pk, gpu__node=node).exists()
                )

    assert len(job_nodes(gang.pk)) == 2  # the gang spans both nodes
    check()
    now = timezone.now()
    service.requeue([gang.pk], now, "test")  # rows inactive, job pending
    check()
    with capture(execute=True):
        service.run_round(policy="fifo")  # placed again: generation 2
    check()
    for job in small:  # each finishes on its node
        name = Placement.objects.filter(job=job).values_list("gpu__node__name", flat=True).get()
        item = {"job_id": job.pk, **BASE, "event": "finished", "iterations_done": 10}
        send(fleet[name][1], capture, node=name, events=[item])
    assert set(Job.objects.filter(pk__in=[j.pk for j in small]).values_list("status", flat=True)) == {
        "succeeded"
    }
    check()


def test_a_gang_over_two_nodes_keeps_its_rules(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """The nodes holding the job now come from the one read: a gang's progress is its slowest
    node's, and it succeeds with the ``finished`` of its last node (AGENT.md §1)."""
    capture = django_capture_on_commit_callbacks
    gang = Job.objects.create(
        tenant=tenant, name="gang", model="resnet50", batch_size=128, iterations=100, gpus=6
    )
    with capture(execute=True):
        service.run_round(policy="fifo")
    assert job_nodes(gang.pk) == {"node-00", "node-01"}

    def event(name: str, kind: str, done: float) -> None:
        item = {"job_id": gang.pk, **BASE, "event": kind, "iterations_done": done}
        send(fleet[name][1], capture, node=name, events=[item])

    event("node-00", "started", 0)
    event("node-00", "progress", 40)
    gang.refresh_from_db()
    assert gang.iterations_done == 0  # node-01 has not reported yet
    event("node-01", "started", 0)
    event("node-01", "progress", 30)
    gang.refresh_from_db()
    assert gang.iterations_done == 30  # min(40, 30)
    event("node-00", "finished", 100)
    gang.refresh_from_db()
    assert gang.status == "running"
    assert gang.events.order_by("-id").values_list("kind", "message")[0] == (
        "progress",
        "finished on node node-00",
    )
    event("node-01", "finished", 100)
    gang.refresh_from_db()
    assert (gang.status, gang.iterations_done) == ("succeeded", 100)
