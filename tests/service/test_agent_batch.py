"""``POST /api/v1/agent/batch/`` (cluster/agent_batch.py, docs/AGENT.md §2b): one request per node
and tick with its output, events and heartbeat, answered per item and with its orders.

The equivalence test runs the same script of reports on two nodes — one item per request on
node-00, one batch on node-01 — and compares what the database holds for each node's jobs
(statuses, progress, events, output), node names aside.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from cluster.joblog_models import JobLogChunk
from cluster.models import Job, JobEvent, Node, Placement, Tenant
from scheduling import service
from scheduling.service.orders import record_orders
from tests.service.test_agent_api import HEARTBEAT_URL, agent, events_url

BATCH_URL = "/api/v1/agent/batch/"
GPUS = [{"index": i, "uuid": "", "memory_mb": 16_000, "healthy": True} for i in range(4)]


def logs_url(job_id: int) -> str:
    return f"/api/v1/agent/jobs/{job_id}/logs/"


def placed(tenant: Tenant, capture: Callable, count: int = 8) -> dict[str, list[Job]]:
    """``count`` 1-GPU jobs placed by one FIFO round → node name → its jobs (by pk)."""
    for i in range(count):
        Job.objects.create(
            tenant=tenant, name=f"j{i}", model="resnet50", batch_size=128, iterations=1000, gpus=1
        )
    with capture(execute=True):
        service.run_round(policy="fifo")
    by_node: dict[str, list[Job]] = {}
    for job_id, node in (
        Placement.objects.filter(active=True).order_by("job_id").values_list("job_id", "gpu__node__name")
    ):
        by_node.setdefault(node, []).append(Job.objects.get(pk=job_id))
    return by_node


def script(node: str, jobs: list[Job]) -> tuple[list[dict], list[dict], dict]:
    """One tick's output chunks, events and heartbeat of ``node`` running ``jobs`` (4 of them):
    job 0 starts and finishes, job 1 progresses, job 2 reports a generation never sent (409)
    between them, job 3 fails."""
    a, b, c, d = (j.pk for j in jobs)
    run = f"{node}/g1"
    chunks = [
        {"job_id": a, "run": run, "offset": 0, "data": "epoch 1\n", "eof": False},
        {"job_id": a, "run": run, "offset": 8, "data": "done\n", "eof": True},
        {"job_id": b, "run": run, "offset": 0, "data": "warming up\n", "eof": False},
    ]
    base = {"generation": 1, "iter_time_s": 0.5, "reason": "", "memory_mb": None, "failure_kind": ""}
    events = [
        {"job_id": a, **base, "event": "started", "iterations_done": 0},
        {"job_id": b, **base, "event": "started", "iterations_done": 0},
        {"job_id": c, **base, "event": "progress", "iterations_done": 5, "generation": 9},
        {"job_id": b, **base, "event": "progress", "iterations_done": 340},
        {"job_id": a, **base, "event": "finished", "iterations_done": 1000},
        {"job_id": d, **base, "event": "failed", "iterations_done": 20, "reason": "exit code 1"},
    ]
    heartbeat = {"gpus": GPUS, "running": [{"job_id": b, "generation": 1, "iterations_done": 350}]}
    return chunks, events, heartbeat


def state(node: str, jobs: list[Job]) -> list[Any]:
    """What the database holds for ``jobs``, ``node``'s name replaced by ``N``."""
    rows = []
    for job in jobs:
        job.refresh_from_db()
        events = [
            (kind, message.replace(node, "N"), json.dumps(data, sort_keys=True).replace(node, "N"))
            for kind, message, data in JobEvent.objects.filter(job=job)
            .order_by("id")
            .values_list("kind", "message", "data")
        ]
        text = "".join(JobLogChunk.objects.filter(job=job).order_by("offset").values_list("text", flat=True))
        rows.append((job.status, job.iterations_done, job.measured_iteration_time_s, events, text))
    return rows


def test_a_batch_does_what_the_items_do_one_by_one(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)
    assert sorted(jobs) == ["node-00", "node-01"] and len(jobs["node-00"]) == len(jobs["node-01"]) == 4

    # node-00: one request per item, in the batch's order (output, events, heartbeat)
    one = agent(fleet["node-00"][1])
    chunks, events, heartbeat = script("node-00", jobs["node-00"])
    codes = []
    with capture(execute=True):
        for chunk in chunks:
            body = {k: v for k, v in chunk.items() if k != "job_id"}
            codes.append(one.post(logs_url(chunk["job_id"]), body, format="json").status_code)
        for event in events:
            body = {k: v for k, v in event.items() if k != "job_id"}
            codes.append(one.post(events_url(event["job_id"]), body, format="json").status_code)
        beat = one.post(HEARTBEAT_URL, {"node": "node-00", **heartbeat}, format="json")
    assert codes == [200, 200, 200, 200, 200, 409, 200, 200, 200] and beat.status_code == 200

    # node-01: the same in one batch
    chunks, events, heartbeat = script("node-01", jobs["node-01"])
    with capture(execute=True):
        answer = agent(fleet["node-01"][1]).post(
            BATCH_URL,
            {"node": "node-01", "logs": chunks, "events": events, "heartbeat": heartbeat},
            format="json",
        )
    assert answer.status_code == 200
    body = answer.json()
    assert [i["code"] for i in body["logs"]] == [200, 200, 200]
    assert [i["received"] for i in body["logs"]] == [8, 13, 11]
    assert [i["code"] for i in body["events"]] == [200, 200, 409, 200, 200, 200]
    assert body["events"][2] == {"job_id": jobs["node-01"][2].pk, "code": 409, "error": "stale generation"}
    assert body["events"][4]["status"] == "succeeded" and body["events"][5]["status"] == "failed"
    assert body["heartbeat"] == beat.json() == {"stopped": [], "requeued": []}
    assert "orders" not in body

    assert state("node-01", jobs["node-01"]) == state("node-00", jobs["node-00"])
    a, b, c, d = state("node-01", jobs["node-01"])
    assert (a[0], a[1], a[4]) == ("succeeded", 1000, "epoch 1\ndone\n")
    assert (b[0], b[1], b[4]) == ("running", 350, "warming up\n")  # the heartbeat's 350 > 340
    assert (c[0], c[1]) == ("running", 0) and d[0] == "failed"
    assert Node.objects.get(name="node-01").last_heartbeat is not None


def test_a_malformed_item_refuses_the_whole_batch_with_its_name(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture, 1)["node-00"]
    good = {"job_id": jobs[0].pk, "generation": 1, "event": "started", "iterations_done": 0}
    bad = {**good, "event": "progress", "iterations_done": "many"}
    client = agent(fleet["node-00"][1])
    with capture(execute=True):
        answer = client.post(BATCH_URL, {"node": "node-00", "events": [good, bad]}, format="json")
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "invalid input: events: 1: iterations_done: A valid number is required.",
        "fields": {"events": {"1": {"iterations_done": ["A valid number is required."]}}},
    }
    assert not JobEvent.objects.filter(job=jobs[0], kind=JobEvent.Kind.STARTED).exists()  # none applied
    too_many = {"node": "node-00", "events": [good] * 501}
    assert client.post(BATCH_URL, too_many, format="json").status_code in (400, 413)
    assert client.post(BATCH_URL, {"events": [good]}, format="json").status_code == 400  # no node
    assert client.post(BATCH_URL, [good], format="json").status_code == 400  # not an object
    other = client.post(BATCH_URL, {"node": "node-01", "events": [good]}, format="json")
    assert other.status_code == 403
    assert other.json() == {  # the code is what the agent stops on (docs/AGENT.md §4)
        "error": "this token belongs to node node-00, not node-01",
        "code": "token_node_mismatch",
        "token_node": "node-00",
        "node": "node-01",
    }
    assert agent("not-a-token").post(BATCH_URL, {"node": "node-00"}, format="json").status_code == 401


def test_an_integer_beyond_the_float_range_is_a_400_naming_the_field(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """A JSON integer of 401 digits where a number is due: the 400 of an invalid number (it was an
    OverflowError, a 500), in the batch report and at the event endpoint alike."""
    jobs = placed(tenant, django_capture_on_commit_callbacks, 1)["node-00"]
    client = agent(fleet["node-00"][1])
    huge = "1" + "0" * 400
    event = f'{{"generation": 1, "event": "started", "iterations_done": {huge}}}'
    batch = f'{{"node": "node-00", "events": [{{"job_id": {jobs[0].pk}, {event[1:]}]}}'
    answer = client.post(BATCH_URL, batch, content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["fields"] == {"events": {"0": {"iterations_done": ["A valid number is required."]}}}
    beat = f'{{"node": "node-00", "heartbeat": {{"gpus": [], "running": [], "report_latency_s": {huge}}}}}'
    answer = client.post(BATCH_URL, beat, content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["fields"] == {"heartbeat": {"report_latency_s": ["A valid number is required."]}}
    single = client.post(events_url(jobs[0].pk), event, content_type="application/json")
    assert single.status_code == 400
    assert single.json()["fields"] == {"iterations_done": ["A valid number is required."]}
    assert not JobEvent.objects.filter(job=jobs[0], kind=JobEvent.Kind.STARTED).exists()


def test_a_heartbeat_listing_a_gpu_index_twice_refuses_the_batch_as_the_endpoint_does(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture, 1)["node-00"]
    started = {"job_id": jobs[0].pk, "generation": 1, "event": "started", "iterations_done": 0}
    gpus = [*GPUS, {**GPUS[2], "healthy": False}]  # GPU 2 twice: healthy and not
    body = {"node": "node-00", "events": [started], "heartbeat": {"gpus": gpus, "running": []}}
    with capture(execute=True):
        answer = agent(fleet["node-00"][1]).post(BATCH_URL, body, format="json")
    assert answer.status_code == 400
    said = "GPU index 2 is listed 2 times; list each GPU of the node once"
    assert answer.json() == {
        "error": f"invalid input: heartbeat: gpus: {said}",
        "fields": {"heartbeat": {"gpus": [said]}},
    }
    assert not JobEvent.objects.filter(job=jobs[0], kind=JobEvent.Kind.STARTED).exists()  # none applied


def test_a_heartbeat_listing_a_job_twice_refuses_the_batch_as_the_endpoint_does(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture, 1)["node-00"]
    started = {"job_id": jobs[0].pk, "generation": 1, "event": "started", "iterations_done": 0}
    running = [{"job_id": jobs[0].pk, "generation": 1}] * 3
    body = {"node": "node-00", "events": [started], "heartbeat": {"gpus": GPUS, "running": running}}
    with capture(execute=True):
        answer = agent(fleet["node-00"][1]).post(BATCH_URL, body, format="json")
    assert answer.status_code == 400
    said = f"job {jobs[0].pk} is listed 3 times; list each job the node runs once"
    assert answer.json() == {
        "error": f"invalid input: heartbeat: running: {said}",
        "fields": {"heartbeat": {"running": [said]}},
    }
    assert not JobEvent.objects.filter(job=jobs[0], kind=JobEvent.Kind.STARTED).exists()  # none applied


def test_another_nodes_job_and_an_unknown_job_are_refused_in_their_place(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """node-01 reports on node-00's job (403, as alone), on a job that does not exist (404), and
    on its own job (applied): the answer holds each item's status in the order sent."""
    capture = django_capture_on_commit_callbacks
    jobs = placed(tenant, capture)
    theirs, mine = jobs["node-00"][0], jobs["node-01"][0]
    event = {"generation": 1, "event": "started", "iterations_done": 0}
    report = {
        "node": "node-01",
        "events": [
            {"job_id": theirs.pk, **event},
            {"job_id": 999_999, **event},
            {"job_id": mine.pk, **event},
        ],
        "logs": [{"job_id": theirs.pk, "run": "node-01/g1", "offset": 0, "data": "x\n"}],
    }
    with capture(execute=True):
        body = agent(fleet["node-01"][1]).post(BATCH_URL, report, format="json").json()
    assert body["events"] == [
        {"job_id": theirs.pk, "code": 403, "error": f"job {theirs.pk} was never placed on node node-01"},
        {"job_id": 999_999, "code": 404, "error": "job 999999 does not exist"},
        {"job_id": mine.pk, "code": 200, "status": "running", "accepted": True},
    ]
    assert body["logs"] == [
        {"job_id": theirs.pk, "code": 403, "error": f"job {theirs.pk} was never placed on node node-01"}
    ]
    assert not JobEvent.objects.filter(job=theirs, kind=JobEvent.Kind.STARTED).exists()
    assert JobEvent.objects.filter(job=mine, kind=JobEvent.Kind.STARTED).count() == 1
    assert not JobLogChunk.objects.filter(job=theirs).exists()


def test_the_answer_carries_the_nodes_orders_after_its_cursor(
    fleet: dict, django_capture_on_commit_callbacks: Callable
) -> None:
    stop = {"node": "node-00", "job_id": 7, "generation": 2, "action": "stop"}
    record_orders([stop, {**stop, "job_id": 8}, {**stop, "node": "node-01"}])
    client = agent(fleet["node-00"][1])
    first = client.post(BATCH_URL, {"node": "node-00", "after": 0}, format="json").json()
    assert first == {
        "logs": [],
        "events": [],
        "heartbeat": None,
        "orders": {
            "cursor": 2,
            "orders": [{"seq": 1, "message": stop}, {"seq": 2, "message": {**stop, "job_id": 8}}],
        },
    }
    # the cursor acknowledges them: the next report gets none
    assert client.post(BATCH_URL, {"node": "node-00", "after": 2}, format="json").json()["orders"] == {
        "cursor": 2,
        "orders": [],
    }


def test_the_node_counts_as_heard_when_its_report_is_read_not_when_it_is_done(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable, monkeypatch: Any
) -> None:
    """A report's items may take long under load (up to 17 s in bench_kueue.py): while they are
    applied, its node is already heard from (from the report's arrival on, then every second),
    so the heartbeat check meanwhile does not count the time the server takes against it."""
    from datetime import timedelta

    from django.utils import timezone

    from cluster import agent_batch

    capture = django_capture_on_commit_callbacks
    job = placed(tenant, capture, 1)["node-00"][0]
    old = timezone.now() - timedelta(seconds=100)
    Node.objects.filter(name="node-00").update(last_heartbeat=old)
    seen = []
    original = agent_batch.apply_event

    def slow_event(node: Node, item: dict[str, Any]) -> dict[str, Any]:
        seen.append(Node.objects.get(pk=node.pk).last_heartbeat)
        return original(node, item)

    monkeypatch.setattr(agent_batch, "apply_event", slow_event)
    report = {
        "node": "node-00",
        "events": [{"job_id": job.pk, "generation": 1, "event": "started", "iterations_done": 0}],
        "heartbeat": {"gpus": GPUS, "running": [{"job_id": job.pk, "generation": 1}]},
    }
    before = timezone.now()
    with capture(execute=True):
        assert agent(fleet["node-00"][1]).post(BATCH_URL, report, format="json").status_code == 200
    assert len(seen) == 1 and seen[0] >= before  # heard before its event was applied
    # a report without a heartbeat is a sign of life too (its status and GPUs do not change)
    Node.objects.filter(name="node-00").update(last_heartbeat=old, status=Node.Status.UNHEALTHY)
    before = timezone.now()
    with capture(execute=True):
        agent(fleet["node-00"][1]).post(
            BATCH_URL, {"node": "node-00", "events": report["events"]}, format="json"
        )
    node = Node.objects.get(name="node-00")
    assert seen[-1] >= before and node.last_heartbeat >= before and node.status == Node.Status.UNHEALTHY
