"""What a node agent may change (docs/AGENT.md §2–3): generations within what the database holds,
and no progress for a job that has moved to another node.

The fleet of ``test_agent_api``: node-00 (core GPUs 0–3) and node-01 (4–7), 4 GPUs each.
"""

from __future__ import annotations

from collections.abc import Callable

from cluster.models import MAX_REPORTED_GENERATION, Job, Placement, Tenant
from scheduling.core import types as core
from tests.service.test_agent_api import beat, place, report
from tests.service.test_rounds import FixedPolicy, round_now


def test_a_node_the_job_moved_away_from_cannot_set_its_progress(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)  # on node-00, generation 1
    _, token0 = fleet["node-00"]
    _, token1 = fleet["node-01"]
    assert report(token0, job, capture, iterations_done=61).json()["accepted"] is True
    # a round moves it: stop on node-00 and start on node-01, both generation 2
    move = FixedPolicy(
        preemptions=(core.Preempt(job.pk, "moved"),), starts=(core.Start(job.pk, (4,), 128, 1),)
    )
    round_now(capture, policy=move)
    assert set(Placement.objects.filter(job=job, active=True).values_list("gpu__node__name", flat=True)) == {
        "node-01"
    }
    # node-00 reports with the current generation: answered, but the job's progress stays
    answer = report(token0, job, capture, generation=2, event="progress", iterations_done=1999)
    assert answer.status_code == 200 and answer.json()["accepted"] is False
    job.refresh_from_db()
    assert job.iterations_done == 61 and job.status == Job.Status.RUNNING
    # the node that runs it now moves it on
    assert report(token1, job, capture, generation=2, event="progress", iterations_done=70).json()["accepted"]
    job.refresh_from_db()
    assert job.iterations_done == 70


def test_a_preempted_jobs_last_node_still_reports_how_far_it_got(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    _, token0 = fleet["node-00"]
    round_now(capture, policy=FixedPolicy(preemptions=(core.Preempt(job.pk, "reclaim"),)))
    answer = report(token0, job, capture, generation=2, event="stopped", iterations_done=120)
    assert answer.json() == {"job_id": job.pk, "status": "pending", "accepted": True}
    job.refresh_from_db()
    assert job.iterations_done == 120


def test_heartbeat_generations_are_bounded_by_what_the_database_holds(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)  # on node-00
    _, token1 = fleet["node-01"]
    too_high = [{"job_id": job.pk, "generation": MAX_REPORTED_GENERATION + 1, "iterations_done": 1}]
    answer = beat(token1, "node-01", capture, running=too_high)
    assert answer.status_code == 400 and set(answer.json()["fields"]) == {"running"}
    huge_id = [{"job_id": 2**63, "generation": 1, "iterations_done": 1}]
    assert beat(token1, "node-01", capture, running=huge_id).status_code == 400
    # the highest accepted: node-01 does not hold the job, so it is stopped one generation above
    sent.clear()
    highest = [{"job_id": job.pk, "generation": MAX_REPORTED_GENERATION, "iterations_done": 1}]
    answer = beat(token1, "node-01", capture, running=highest)
    assert answer.status_code == 200 and answer.json()["stopped"] == [job.pk]
    assert sent == [{"node": "node-01", "job_id": job.pk, "generation": 2**31 - 1, "action": "stop"}]
    # and the node's liveness was recorded with it
    assert fleet["node-01"][0].__class__.objects.get(name="node-01").last_heartbeat is not None


def test_event_generations_are_bounded(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    _, token0 = fleet["node-00"]
    answer = report(token0, job, capture, generation=2**31)
    assert answer.status_code == 400 and set(answer.json()["fields"]) == {"generation"}
