"""The agent endpoints of docs/AGENT.md §2–3 over the Django test client (SQLite or PostgreSQL):
node-token auth, generations, job transitions, heartbeats, reconciliation, the heartbeat timeout.

The fleet: node-00 and node-01, four 16,000 MB V100s each, with their agent tokens. Jobs are
placed by a real round (policy ``fifo``: one 1-GPU job goes to node-00's GPU 0, generation 1).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from cluster.api_tokens import ApiToken
from cluster.models import GPU, Job, JobEvent, Node, Placement, Tenant
from scheduling import service

HEARTBEAT_URL = "/api/v1/agent/heartbeat/"
# fixtures ``fleet`` (node-00 and node-01 with their agent tokens) and ``tenant``: tests/service/conftest.py


def events_url(job_id: int) -> str:
    return f"/api/v1/agent/jobs/{job_id}/events/"


def agent(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Node {token}")
    return client


def place(tenant: Tenant, capture: Callable, name: str = "job", **fields: Any) -> Job:
    """A 1-GPU ResNet-50 job (1,000 iterations) submitted and placed by one FIFO round."""
    values: dict[str, Any] = {
        "model": "resnet50",
        "batch_size": 128,
        "iterations": 1000,
        "gpus": 1,
        "iteration_time_s": 0.5,
    }
    values.update(fields)
    job = Job.objects.create(tenant=tenant, name=name, **values)
    with capture(execute=True):
        service.run_round(policy="fifo")
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    return job


def report(token: str, job: Job, capture: Callable, **body: Any) -> Any:
    payload = {"generation": 1, "event": "progress", "iterations_done": 0, "iter_time_s": None, "reason": ""}
    payload.update(body)
    with capture(execute=True):
        return agent(token).post(events_url(job.pk), payload, format="json")


def beat(
    token: str,
    node: str,
    capture: Callable,
    gpus: int | list[dict[str, Any]] = 4,
    running: list[dict[str, Any]] | None = None,
) -> Any:
    if isinstance(gpus, int):
        gpus = [
            {"index": i, "uuid": f"declared-{node}-{i}", "memory_mb": 16_000, "healthy": True}
            for i in range(gpus)
        ]
    with capture(execute=True):
        return agent(token).post(
            HEARTBEAT_URL, {"node": node, "gpus": gpus, "running": running or []}, format="json"
        )


# ------------------------------------------------------------------------------------------ auth


def test_agent_endpoints_need_the_node_token(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = place(tenant, django_capture_on_commit_callbacks)
    body = {"generation": 1, "event": "progress", "iterations_done": 5}
    assert APIClient().post(events_url(job.pk), body, format="json").status_code == 401
    assert agent("not-a-token").post(events_url(job.pk), body, format="json").status_code == 401
    assert APIClient().post(HEARTBEAT_URL, {}, format="json").json() == {
        "error": "Authentication credentials were not provided."  # none given: DRF's words hold
    }
    # node-00's token cannot send node-01's heartbeat
    _, token0 = fleet["node-00"]
    response = beat(token0, "node-01", django_capture_on_commit_callbacks)
    assert response.status_code == 403
    assert response.json() == {
        "error": "this token belongs to node node-00, not node-01",
        "code": "token_node_mismatch",
        "token_node": "node-00",
        "node": "node-01",
    }


def test_a_tenants_api_token_on_an_agent_endpoint_is_a_coded_403_saying_it_needs_a_node_token(
    fleet: dict, tenant: Tenant
) -> None:
    """It used to be 401 "Authentication credentials were not provided." — though credentials
    were given: the wrong kind, which a 403 coded ``node_token_required`` now says."""
    owner = tenant.memberships.get().user
    paths = [
        ("post", HEARTBEAT_URL),
        ("post", events_url(1)),
        ("post", "/api/v1/agent/jobs/1/logs/"),
        ("post", "/api/v1/agent/batch/"),
        ("get", "/api/v1/agent/orders/"),
    ]
    expected = {
        "Token " + ApiToken.issue(owner)[1]: "a tenant's API token ('Token ...')",  # a valid one
        "Token not-a-token": "a tenant's API token ('Token ...')",
        "Bearer abc": "'Bearer' credentials",
        "B\u00e9arer abc": "other credentials",
    }
    for authorization, given in expected.items():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=authorization)
        for method, path in paths:
            response = client.post(path, {}, format="json") if method == "post" else client.get(path)
            assert response.status_code == 403, (authorization, path)
            assert response.json() == {
                "error": "this endpoint takes a node agent's token, sent as 'Authorization: Node "
                f"<token>' (printed when the node was registered), not {given}",
                "code": "node_token_required",
            }


def test_another_nodes_token_cannot_report_on_this_nodes_job(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = place(tenant, django_capture_on_commit_callbacks)
    assert {m["node"] for m in sent} == {"node-00"}
    _, token1 = fleet["node-01"]
    response = report(token1, job, django_capture_on_commit_callbacks, event="finished", iterations_done=1000)
    assert response.status_code == 403
    assert "code" not in response.json()  # one job's refusal: the agent must not stop on it
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING and job.iterations_done == 0


def test_unknown_job_is_404_and_bad_body_400(fleet: dict) -> None:
    _, token = fleet["node-00"]
    client = agent(token)
    assert (
        client.post(
            events_url(999), {"generation": 1, "event": "progress", "iterations_done": 1}, format="json"
        ).status_code
        == 404
    )
    bad = client.post(
        events_url(999), {"generation": "1", "event": "exploded", "iterations_done": -1}, format="json"
    )
    assert bad.status_code == 400 and set(bad.json()["fields"]) == {"generation", "event", "iterations_done"}


# ------------------------------------------------------------------------------------ job events


def test_job_lifecycle_started_progress_finished(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    _, token = fleet["node-00"]
    assert report(token, job, capture, event="started").json() == {
        "job_id": job.pk,
        "status": "running",
        "accepted": True,
    }
    # a repeated started is a no-op
    assert report(token, job, capture, event="started").json()["accepted"] is False
    assert report(token, job, capture, iterations_done=340, iter_time_s=0.61).status_code == 200
    job.refresh_from_db()
    assert job.iterations_done == 340 and job.measured_iteration_time_s == 0.61
    # progress keeps the maximum (a late, older progress does not move it back)
    report(token, job, capture, iterations_done=200)
    job.refresh_from_db()
    assert job.iterations_done == 340

    finished = report(token, job, capture, event="finished", iterations_done=1000, iter_time_s=0.5)
    assert finished.status_code == 200 and finished.json()["status"] == "succeeded"
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.finished_at is not None
    assert job.iterations_done == 1000
    assert not Placement.objects.filter(job=job, active=True).exists()
    kinds = list(job.events.values_list("kind", flat=True))
    assert kinds.count("succeeded") == 1 and kinds.count("started") == 1 and kinds.count("progress") == 2

    # delivered twice (a retry after a lost response): 200, nothing changes
    again = report(token, job, capture, event="finished", iterations_done=1000)
    assert again.status_code == 200 and again.json() == {
        "job_id": job.pk,
        "status": "succeeded",
        "accepted": False,
    }
    assert job.events.filter(kind="succeeded").count() == 1


def test_stale_generation_is_409(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    _, token = fleet["node-00"]
    # the placement is generation 1: 0 is older than the floor, 2 was never sent
    for generation in (0, 2):
        response = report(token, job, capture, generation=generation, iterations_done=10)
        assert response.status_code == 409 and response.json() == {"error": "stale generation"}
    job.refresh_from_db()
    assert job.iterations_done == 0


def test_update_does_not_raise_the_floor(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """An ``update`` (generation 2) crossing a ``progress`` of generation 1 in flight: both accepted."""
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    Placement.objects.filter(job=job, active=True).update(generation=2)  # as an update writes it
    _, token = fleet["node-00"]
    assert report(token, job, capture, generation=1, iterations_done=10).status_code == 200
    assert report(token, job, capture, generation=2, iterations_done=20).status_code == 200
    assert report(token, job, capture, generation=3, iterations_done=30).status_code == 409


def test_failed_job_releases_its_gpus_and_is_stopped(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    sent.clear()
    _, token = fleet["node-00"]
    response = report(
        token,
        job,
        capture,
        event="failed",
        iterations_done=12,
        reason="exit code 1: CUDA error: out of memory",
    )
    assert response.json()["status"] == "failed"
    job.refresh_from_db()
    assert job.failure_reason == "exit code 1: CUDA error: out of memory" and job.finished_at is not None
    assert not Placement.objects.filter(job=job, active=True).exists()
    # generation 1 was the start; the stop is 1 + 1 = 2
    assert sent == [{"node": "node-00", "job_id": job.pk, "generation": 2, "action": "stop"}]


def test_agent_shutdown_puts_the_job_back_with_its_progress(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    _, token = fleet["node-00"]
    report(token, job, capture, iterations_done=400)
    response = report(token, job, capture, event="stopped", iterations_done=450, reason="the agent shut down")
    assert response.json()["status"] == "pending"
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING and job.iterations_done == 450
    assert job.events.filter(kind="requeued").count() == 1
    # the next start resumes there
    sent.clear()
    with capture(execute=True):
        service.run_round(policy="fifo")
    start = [m for m in sent if m["action"] == "start"]
    assert len(start) == 1 and start[0]["iterations_done"] == 450 and start[0]["generation"] == 3


def test_a_finished_partner_gets_an_update_with_slowdown_one(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """Two jobs sharing GPU node-00:0; when one finishes, the other runs alone: ξ = 1."""
    capture = django_capture_on_commit_callbacks
    gpu = GPU.objects.get(node__name="node-00", index=0)
    now = timezone.now()
    jobs = []
    for slot in (0, 1):
        job = Job.objects.create(
            tenant=tenant,
            name=f"pair-{slot}",
            model="resnet50",
            batch_size=128,
            iterations=1000,
            gpus=1,
            iteration_time_s=0.5,
            status=Job.Status.RUNNING,
            started_at=now,
        )
        Placement.objects.create(job=job, gpu=gpu, generation=1, sub_batch=64, slot=slot, created_at=now)
        JobEvent.objects.create(job=job, kind=JobEvent.Kind.PLACED, data={"generation": 1})
        jobs.append(job)
    _, token = fleet["node-00"]
    report(token, jobs[0], capture, event="finished", iterations_done=1000)
    assert len(sent) == 1
    update = sent[0]
    assert (update["job_id"], update["action"], update["generation"]) == (jobs[1].pk, "update", 2)
    assert update["slowdown"] == 1.0 and update["gpu_indices"] == [0]
    assert set(Placement.objects.filter(job=jobs[1], active=True).values_list("generation", flat=True)) == {2}
    # the update did not raise the floor: the partner's generation-1 events still count
    assert report(token, jobs[1], capture, generation=1, iterations_done=10).status_code == 200


# ------------------------------------------------------------------------------------ heartbeats


def test_heartbeat_records_time_and_gpu_health(
    fleet: dict, django_capture_on_commit_callbacks: Callable
) -> None:
    node, token = fleet["node-00"]
    gpus = [
        {
            "index": i,
            "uuid": f"GPU-00000000-0000-0000-0000-00000000000{i}",
            "memory_mb": 40_000,
            "healthy": i != 2,
        }
        for i in range(4)
    ]
    assert beat(token, "node-00", django_capture_on_commit_callbacks, gpus).json() == {
        "stopped": [],
        "requeued": [],
    }
    node.refresh_from_db()
    assert node.last_heartbeat is not None
    rows = {g.index: g for g in GPU.objects.filter(node=node)}
    assert [rows[i].healthy for i in range(4)] == [True, True, False, True]
    assert rows[0].memory_mb == 40_000 and rows[0].uuid.endswith("0000")
    # GPU 2 gets no new work: 8 GPUs − 1 = 7 schedulable
    assert GPU.objects.schedulable().count() == 7


def test_a_heartbeat_listing_a_job_twice_is_400_naming_it(
    fleet: dict, django_capture_on_commit_callbacks: Callable
) -> None:
    """It used to be a 200: which generation of job 7 does the node run?"""
    node, token = fleet["node-00"]
    running = [{"job_id": 7, "generation": 1}, {"job_id": 8, "generation": 1}, {"job_id": 7, "generation": 2}]
    response = beat(token, "node-00", django_capture_on_commit_callbacks, running=running)
    assert response.status_code == 400
    said = "job 7 is listed 2 times; list each job the node runs once"
    assert response.json() == {"error": f"invalid input: running: {said}", "fields": {"running": [said]}}
    node.refresh_from_db()
    assert node.last_heartbeat is None  # nothing recorded


def test_a_heartbeat_listing_a_gpu_index_twice_is_400_naming_it(
    fleet: dict, django_capture_on_commit_callbacks: Callable
) -> None:
    node, token = fleet["node-00"]
    gpus = [{"index": i, "uuid": "", "memory_mb": 16_000, "healthy": True} for i in (0, 1, 2, 1, 3)]
    gpus[3]["healthy"] = False  # which of the two is GPU 1? the server must not pick one
    response = beat(token, "node-00", django_capture_on_commit_callbacks, gpus)
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid input: gpus: GPU index 1 is listed 2 times; list each GPU of the node once",
        "fields": {"gpus": ["GPU index 1 is listed 2 times; list each GPU of the node once"]},
    }
    node.refresh_from_db()
    assert node.last_heartbeat is None  # nothing recorded
    assert GPU.objects.filter(node=node, healthy=True).count() == 4


def test_zero_gpu_blip_keeps_running_jobs(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    node, token = fleet["node-00"]
    sent.clear()
    running = [{"job_id": job.pk, "generation": 1, "iterations_done": 50}]
    assert beat(token, "node-00", capture, gpus=[], running=running).status_code == 200
    assert not GPU.objects.filter(node=node, healthy=True).exists()  # unschedulable
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING and job.iterations_done == 50 and sent == []
    # the GPUs come back with the next heartbeat
    beat(token, "node-00", capture, running=running)
    assert GPU.objects.filter(node=node, healthy=True).count() == 4


def test_heartbeat_timeout_requeues_with_progress_kept(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    node, token = fleet["node-00"]
    beat(token, "node-00", capture, running=[{"job_id": job.pk, "generation": 1, "iterations_done": 340}])
    node.refresh_from_db()
    t0 = node.last_heartbeat
    # node-01 is alive: heard from up to the last check (a node never heard from has a deadline
    # too; silence is judged against the newest heartbeat read, scheduling/service/silence.py)
    Node.objects.filter(name="node-01").update(last_heartbeat=t0 + timedelta(seconds=16))
    sent.clear()
    with override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=15.0):
        with capture(execute=True):
            assert service.check_heartbeats(t0 + timedelta(seconds=14)) == {}
        with capture(execute=True):
            assert service.check_heartbeats(t0 + timedelta(seconds=16)) == {"node-00": [job.pk]}
    node.refresh_from_db()
    job.refresh_from_db()
    assert node.status == Node.Status.UNHEALTHY
    assert job.status == Job.Status.PENDING and job.iterations_done == 340
    assert not Placement.objects.filter(job=job, active=True).exists()
    assert sent == [{"node": "node-00", "job_id": job.pk, "generation": 2, "action": "stop"}]
    # the silent node gets no new work: the next round places the job on node-01 from 340
    sent.clear()
    with capture(execute=True):
        service.run_round(policy="fifo")
    assert [(m["node"], m["iterations_done"]) for m in sent] == [("node-01", 340)]
    # node-00 comes back: ready again; what it still runs is stopped (generation above 3)
    late = [{"job_id": job.pk, "generation": 1, "iterations_done": 360}]
    answer = beat(token, "node-00", capture, running=late)
    assert answer.json()["stopped"] == [job.pk]
    node.refresh_from_db()
    assert node.status == Node.Status.READY
    assert sent[-1] == {"node": "node-00", "job_id": job.pk, "generation": 4, "action": "stop"}
    # its late progress of the replaced run is refused
    assert report(token, job, capture, generation=1, iterations_done=360).status_code == 409


def test_restarted_agent_reports_nothing_and_the_job_is_requeued(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    Placement.objects.filter(job=job).update(created_at=timezone.now() - timedelta(seconds=60))
    _, token = fleet["node-00"]
    report(token, job, capture, iterations_done=120)
    with override_settings(SHAREWISE_HEARTBEAT_INTERVAL_S=0.0):
        # one heartbeat without the job may cross its finished event in flight: not yet
        assert beat(token, "node-00", capture).json()["requeued"] == []
        # missing again, one interval (here 0 s) after the first miss: the agent lost it
        assert beat(token, "node-00", capture).json()["requeued"] == [job.pk]
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING and job.iterations_done == 120


def test_a_job_just_placed_is_not_missing(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """Placed less than one heartbeat interval ago (its start may still be in flight), or missing
    for less than one interval (its finished may still be in the agent's outbox): not lost."""
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    _, token = fleet["node-00"]
    for _ in range(3):
        assert beat(token, "node-00", capture).json()["requeued"] == []
    Placement.objects.filter(job=job).update(created_at=timezone.now() - timedelta(seconds=60))
    for _ in range(3):  # heartbeats every few ms: missing for far less than the 5 s interval
        assert beat(token, "node-00", capture).json()["requeued"] == []
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING


def test_unexpected_job_is_stopped(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    with capture(execute=True):
        assert job.cancel("by a test")
    sent.clear()
    _, token = fleet["node-00"]
    # the agent missed the cancel's stop: it still runs generation 1
    still = [{"job_id": job.pk, "generation": 1, "iterations_done": 9}]
    answer = beat(token, "node-00", capture, running=still)
    assert answer.json() == {"stopped": [job.pk], "requeued": []}
    assert sent == [{"node": "node-00", "job_id": job.pk, "generation": 2, "action": "stop"}]
    # and one it never heard of at all (an old message redelivered after a restart): generation 7 + 1
    sent.clear()
    beat(token, "node-00", capture, running=[{"job_id": 4242, "generation": 7, "iterations_done": 1}])
    assert sent == [{"node": "node-00", "job_id": 4242, "generation": 8, "action": "stop"}]


def test_cancel_over_the_api_stops_the_job_on_its_node(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    from django.contrib.auth import get_user_model

    from tests.api.conftest import token_client

    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    sent.clear()
    owner = get_user_model().objects.get(username="team-a-owner")
    with capture(execute=True):
        response = token_client(owner).post(f"/api/v1/jobs/{job.pk}/cancel/", format="json")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    # the start was generation 1: the stop is 2, to the node that runs it
    assert sent == [{"node": "node-00", "job_id": job.pk, "generation": 2, "action": "stop"}]
    # the agent's acknowledgment is accepted and changes nothing
    _, token = fleet["node-00"]
    answer = report(token, job, capture, generation=2, event="stopped", iterations_done=5)
    assert answer.status_code == 200 and answer.json()["status"] == "cancelled"


def test_a_run_requeued_while_its_node_was_silent_that_finished_meanwhile_succeeds(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """The web service is down for longer than the heartbeat timeout: the scheduler hears nothing
    from node-00, requeues its job (generation 2: stop) — but the job ran on and finished. Its
    "finished" of generation 1, sent when the web service is back and before any new placement,
    is the job's completion, not a stale report: the job succeeds with its 1,000 iterations
    instead of running again from 340."""
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    node, token = fleet["node-00"]
    beat(token, "node-00", capture, running=[{"job_id": job.pk, "generation": 1, "iterations_done": 340}])
    node.refresh_from_db()
    Node.objects.filter(name="node-01").update(last_heartbeat=node.last_heartbeat + timedelta(seconds=16))
    with override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=15.0):
        with capture(execute=True):
            service.check_heartbeats(node.last_heartbeat + timedelta(seconds=16))
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING
    # a "finished" short of the job's iterations is still a stale report of the replaced run
    short = report(token, job, capture, generation=1, event="finished", iterations_done=10)
    assert short.status_code == 409
    done = report(token, job, capture, generation=1, event="finished", iterations_done=1000)
    assert done.status_code == 200 and done.json()["status"] == "succeeded"
    job.refresh_from_db()
    assert (job.status, job.iterations_done) == (Job.Status.SUCCEEDED, 1000)
    assert job.events.filter(kind="succeeded").count() == 1
