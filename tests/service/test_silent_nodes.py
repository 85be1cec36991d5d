"""A node whose agent never starts (TESTING.md "Faults": register a node whose agent never
starts): it is trusted for one heartbeat timeout after its registration, then it takes no new
job, the heartbeat check marks it unhealthy and requeues what it held, and ``/metrics`` says it
is down. Its first heartbeat makes it ready again."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from scheduling import service
from scheduling.service.prometheus import registry
from tests.service.test_agent_api import beat, place

TIMEOUT_S = 15.0


def node_up(name: str) -> float | None:
    return registry.get_sample_value("sharewise_node_up", {"node": name})


@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S)
def test_a_node_never_heard_from_gets_a_deadline_from_its_registration(
    fleet: dict,
    tenant: Tenant,
    sent: list,
    django_capture_on_commit_callbacks: Callable,
    caplog: pytest.LogCaptureFixture,
) -> None:
    capture = django_capture_on_commit_callbacks
    node, token = fleet["node-00"]
    registered = timezone.now() - timedelta(seconds=5)
    Node.objects.update(created_at=registered)  # both nodes registered 5 s ago, never heard from
    # within the deadline a new node is trusted: a round places on it
    job = place(tenant, capture)
    assert {m["node"] for m in sent} == {"node-00"}
    assert node_up("node-00") == 1.0
    within = registered + timedelta(seconds=TIMEOUT_S - 1)
    assert all(g.healthy for g in service.load_state(within).snapshot.cluster.gpus)
    assert service.check_heartbeats(within) == {}

    # one timeout after registration without a heartbeat: no new job, and what it holds goes back
    late = registered + timedelta(seconds=TIMEOUT_S + 1)
    assert not any(g.healthy for g in service.load_state(late).snapshot.cluster.gpus)
    sent.clear()
    with capture(execute=True), caplog.at_level("WARNING", logger="scheduling.service.heartbeats"):
        assert service.check_heartbeats(late) == {"node-00": [job.pk], "node-01": []}
    assert sorted(r.getMessage() for r in caplog.records) == [  # one line per node, for the logs
        f"node node-00 sent no heartbeat within 15 s of its registration: marked unhealthy; "
        f"requeued jobs: {job.pk}",
        "node node-01 sent no heartbeat within 15 s of its registration: marked unhealthy; "
        "requeued jobs: none",
    ]
    node.refresh_from_db()
    job.refresh_from_db()
    assert node.status == Node.Status.UNHEALTHY
    assert job.status == Job.Status.PENDING
    assert not Placement.objects.filter(job=job, active=True).exists()
    reason = JobEvent.objects.filter(job=job, kind=JobEvent.Kind.REQUEUED).get().message
    assert reason == "node node-00 sent no heartbeat within 15 s of its registration"
    assert sent == [{"node": "node-00", "job_id": job.pk, "generation": 2, "action": "stop"}]
    assert node_up("node-00") == 0.0

    # its agent starts after all: the first heartbeat makes it ready and schedulable again
    assert beat(token, "node-00", capture).status_code == 200
    node.refresh_from_db()
    assert node.status == Node.Status.READY and node_up("node-00") == 1.0


@pytest.mark.parametrize("status", [Node.Status.DRAINING, Node.Status.UNHEALTHY])
@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S)
def test_a_silent_node_not_ready_gives_back_its_jobs_and_keeps_its_status(
    status: str,
    fleet: dict,
    tenant: Tenant,
    sent: list,
    django_capture_on_commit_callbacks: Callable,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An admin drains node-00 (or marks it unhealthy) while it runs a job, and its agent dies.
    # Before, only ready nodes were judged: the job showed running for ever.
    capture = django_capture_on_commit_callbacks
    registered = timezone.now() - timedelta(seconds=5)
    Node.objects.update(created_at=registered)
    job = place(tenant, capture)
    Node.objects.filter(name="node-00").update(status=status)
    assert service.check_heartbeats(registered + timedelta(seconds=TIMEOUT_S - 1)) == {}
    late = registered + timedelta(seconds=TIMEOUT_S + 1)
    sent.clear()
    with capture(execute=True), caplog.at_level("WARNING", logger="scheduling.service.heartbeats"):
        assert service.check_heartbeats(late) == {"node-01": [], "node-00": [job.pk]}
    reason = f"node node-00 ({status}) sent no heartbeat within 15 s of its registration"
    assert f"{reason}; requeued jobs: {job.pk}" in [r.getMessage() for r in caplog.records]
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING
    assert JobEvent.objects.filter(job=job, kind=JobEvent.Kind.REQUEUED).get().message == reason
    assert not Placement.objects.filter(job=job, active=True).exists()
    assert Node.objects.get(name="node-00").status == status  # a drained node stays drained
    assert sent == [{"node": "node-00", "job_id": job.pk, "generation": 2, "action": "stop"}]
    assert service.check_heartbeats(late + timedelta(seconds=1)) == {}  # nothing left to give back
