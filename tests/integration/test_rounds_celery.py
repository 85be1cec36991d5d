"""Rounds on real PostgreSQL, Redis and Celery workers (TESTING.md, "Faults"): jobs submitted over
REST get placed; a worker killed mid-round leaves no partial round and no double placement; two
rounds started at once → one runs; a round delivered twice places nothing twice. After each, the
invariants of TESTING.md hold (``tests.service.invariants``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from scheduling import service, tasks
from scheduling.core import types as core
from scheduling.models import Round, SchedulerLease
from tests.api.conftest import JOBS_URL, job_body, token_client
from tests.integration.conftest import Workers, node_messages, wait_for
from tests.service.invariants import assert_invariants
from tests.service.test_rounds import FixedPolicy, make_job

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


def all_running(jobs: list[Job]) -> bool:
    return Job.objects.filter(pk__in=[j.pk for j in jobs], status=Job.Status.RUNNING).count() == len(jobs)


def test_jobs_submitted_over_rest_get_placed(nodes: list[Node], workers: Workers, redis_client: Any) -> None:
    Tenant.create_with_owner("team-a", quota_gpus=8, username="alice")
    from django.contrib.auth import get_user_model

    api = token_client(get_user_model().objects.get(username="alice"))
    ids = []
    for i, gpus in enumerate((2, 4, 1)):
        body = job_body(name=f"job-{i}", gpus=gpus, iteration_time_s=0.2)
        response = api.post(JOBS_URL, body, format="json")
        assert response.status_code == 201, response.content
        ids.append(response.json()["id"])
    workers.start()
    # the view asks for a round after a submission; asking again is a no-op inside the window
    service.request_round(delay_s=0)
    jobs = list(Job.objects.filter(pk__in=ids))
    wait_for(lambda: all_running(jobs), 60, f"jobs {ids} running\n{workers.logs()}")
    assert_invariants()
    record = Round.objects.get(n_started=3)
    assert {d["job_id"] for d in record.decision_list() if d["action"] == "start"} == set(ids)

    def all_sent() -> list[dict[str, Any]] | None:
        sent = [m for node in nodes for m in node_messages(redis_client, node.name)]
        return sent if {m["job_id"] for m in sent} == set(ids) else None

    # The worker sends the messages after its round commits, so the jobs can be seen running a
    # moment before their messages reach Redis (all in one pipeline): wait for them too.
    sent = wait_for(all_sent, 30, f"the start messages of jobs {ids}\n{workers.logs()}")
    placed = {
        (p.job_id, p.gpu.node.name, p.gpu.index)
        for p in Placement.objects.filter(active=True).select_related("gpu__node")
    }
    assert {(m["job_id"], m["node"], i) for m in sent for i in m["gpu_indices"]} == placed
    assert {(m["action"], m["generation"]) for m in sent} == {("start", 1)}


def test_a_worker_killed_mid_round_leaves_no_partial_round(
    nodes: list[Node], workers: Workers, redis_client: Any, tmp_path: Path
) -> None:
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=8, username="alice")
    jobs = [make_job(tenant, f"j{i}", gpus=2, iteration_time_s=0.1) for i in range(3)]
    pause = tmp_path / "paused"
    doomed = workers.start(pause_file=pause)
    tasks.run_round.apply_async()
    # generous deadlines: a worker starts slowly on a loaded 2-core machine
    wait_for(pause.exists, 180, f"the round to write its placements\n{workers.logs()}")
    # written but not committed: nothing of the round is visible
    assert not Placement.objects.exists() and not Round.objects.exists()
    assert SchedulerLease.objects.get(name=service.ROUND_LEASE).holder != ""
    workers.kill(doomed)
    assert not Placement.objects.exists() and not Round.objects.exists()
    assert all(j.status == Job.Status.PENDING for j in Job.objects.all())
    assert_invariants()
    # The round's message was never acknowledged (acks_late): it is the one delivery Redis holds
    # as unacknowledged, and no queue holds it.
    assert redis_client.hlen("unacked") == 1
    assert redis_client.llen("scheduler") == 0 and redis_client.llen("celery") == 0
    # The next worker puts it back on its queue once it is older than the visibility timeout
    # (shortened here; the worker checks every second) and runs it. The dead worker's lease row is
    # still claimed, but its advisory lock died with its connection, so the redelivered round takes
    # over at once instead of waiting for the lease to expire.
    workers.start(visibility_s=2)
    wait_for(lambda: all_running(jobs), 180, f"the redelivered round to place the jobs\n{workers.logs()}")
    # acknowledged once the redelivered round has returned
    wait_for(lambda: redis_client.hlen("unacked") == 0, 60, f"the redelivered round's ack\n{workers.logs()}")
    assert Round.objects.count() == 1
    assert Placement.objects.count() == 6
    assert JobEvent.objects.filter(kind=JobEvent.Kind.PLACED).count() == 3
    assert_invariants()


def test_a_round_delivered_twice_places_nothing_twice(nodes: list[Node], workers: Workers) -> None:
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=8, username="alice")
    jobs = [make_job(tenant, f"j{i}", gpus=4, iteration_time_s=0.1) for i in range(3)]
    tasks.run_round.apply_async(kwargs={"policy": "fifo"})
    tasks.run_round.apply_async(kwargs={"policy": "fifo"})  # at-least-once: the same message again
    workers.start()
    wait_for(lambda: Round.objects.count() == 2, 60, f"two rounds\n{workers.logs()}")
    # 8 GPUs, FIFO (exclusive): the first two 4-GPU gangs run, the third waits; nothing twice
    assert all_running(jobs[:2]) and Job.objects.get(pk=jobs[2].pk).status == Job.Status.PENDING
    assert Placement.objects.count() == 8
    assert JobEvent.objects.filter(kind=JobEvent.Kind.PLACED).count() == 2
    assert sorted(Round.objects.values_list("n_started", "n_waiting")) == [(0, 1), (2, 1)]
    assert_invariants()


def test_two_rounds_started_at_once_one_runs(postgres: None, nodes: list[Node]) -> None:
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=8, username="alice")
    job = make_job(tenant, "j", gpus=2, iteration_time_s=0.1)
    entered, release = threading.Event(), threading.Event()
    results: dict[str, Any] = {}

    class Blocking(FixedPolicy):
        def decide(self, snapshot: core.Snapshot, profile: core.Profile, *, explain: bool = True):
            entered.set()
            assert release.wait(30)
            return super().decide(snapshot, profile, explain=explain)

    def start_on(*gpu_ids: int) -> core.Start:
        return core.Start(job.pk, gpu_ids, 128, 1)

    def run(label: str, policy: Any) -> None:
        try:
            results[label] = service.run_round(policy=policy)
        finally:
            connection.close()  # each thread has its own PostgreSQL connection

    first = threading.Thread(target=run, args=("first", Blocking(starts=(start_on(0, 1),))))
    first.start()
    assert entered.wait(30)
    second = threading.Thread(target=run, args=("second", FixedPolicy(starts=(start_on(2, 3),))))
    second.start()
    second.join(30)
    release.set()
    first.join(30)
    assert results["second"] is None
    assert results["first"] is not None and results["first"].n_started == 1
    assert sorted(Placement.objects.filter(job=job).values_list("gpu__index", flat=True)) == [0, 1]
    assert Round.objects.count() == 1
    assert_invariants()
