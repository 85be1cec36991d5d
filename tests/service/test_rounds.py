"""Scheduling rounds against the database (SQLite or PostgreSQL): snapshot, decisions, persistence,
dispatch, lease. The cluster fixture: node-00 and node-01, four 16,000 MB V100s each (8 GPUs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Count
from django.test import override_settings
from django.utils import timezone

from cluster.models import GPU, Job, JobEvent, Node, Placement, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.models import Round, SchedulerLease
from scheduling.profiles import load_default_profile
from tests.service.invariants import assert_invariants


def make_job(tenant: Tenant, name: str = "job", **fields: Any) -> Job:
    """A pending job written straight to the database (ResNet-50, batch 128, 1 GPU by default)."""
    values: dict[str, Any] = {"model": "resnet50", "batch_size": 128, "iterations": 1000, "gpus": 1}
    values.update(fields)
    job = Job.objects.create(tenant=tenant, name=name, **values)
    JobEvent.objects.create(job=job, kind=JobEvent.Kind.SUBMITTED)
    return job


def round_now(capture: Callable, **kwargs: Any) -> Round | None:
    """Run a round and its after-commit dispatch (the test's transaction never commits)."""
    with capture(execute=True):
        return service.run_round(**kwargs)


@dataclass
class FixedPolicy:
    """A policy returning the given decisions whatever the snapshot (to exercise persistence)."""

    starts: tuple[core.Start, ...] = ()
    preemptions: tuple[core.Preempt, ...] = ()
    name: str = "fixed"
    preemptive: bool = True
    seen: core.Snapshot | None = None

    def decide(
        self, snapshot: core.Snapshot, profile: core.Profile, *, explain: bool = True
    ) -> core.RoundDecisions:
        self.seen = snapshot
        return core.RoundDecisions(self.name, snapshot.now, self.starts, self.preemptions, ())


def place(capture: Callable, job: Job, gpu_ids: tuple[int, ...], sub_batch: int = 128) -> Round | None:
    """A round that starts ``job`` on core GPU ids ``gpu_ids`` (a fixed decision)."""
    start = core.Start(job.pk, gpu_ids, sub_batch, job.batch_size // sub_batch)
    return round_now(capture, policy=FixedPolicy(starts=(start,)))


def active_per_gpu() -> Counter[int]:
    return Counter(Placement.objects.filter(active=True).values_list("gpu_id", flat=True))


# ------------------------------------------------------------------------------------ snapshot


def test_snapshot_maps_gpus_jobs_and_quotas(cluster: list[Node], tenant_a: Tenant, tenant_c: Tenant) -> None:
    node0, node1 = cluster
    now = timezone.now()
    GPU.objects.filter(node=node0, index=2).update(healthy=False)
    Node.objects.filter(pk=node1.pk).update(last_heartbeat=now - timedelta(seconds=60))
    timed = make_job(tenant_a, "timed", iteration_time_s=0.5, gpu_memory_mb=8000, gpus=2)
    estimated = make_job(tenant_c, "estimated", batch_size=256, gpus=2)
    with override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=15):
        state = service.load_state(now)
    snap = state.snapshot
    # dense ids in (node name, index) order
    assert [(g.id, g.node, g.index) for g in snap.cluster.gpus] == [
        (i, f"node-0{i // 4}", i % 4) for i in range(8)
    ]
    assert state.gpu_pks == tuple(GPU.objects.order_by("node__name", "index").values_list("pk", flat=True))
    assert state.gpu_labels[5] == "node-01:1"
    # GPU node-00:2 is unhealthy; node-01 has been silent 60 s > 15 s: all its GPUs unreachable
    assert [g.healthy for g in snap.cluster.gpus] == [True, True, False, True, False, False, False, False]
    assert snap.now == pytest.approx(now.timestamp())
    jobs = {j.id: j for j in snap.pending}
    assert jobs[timed.pk].iter_time_s == 0.5 and jobs[timed.pk].memory_mb == 8000.0
    assert jobs[timed.pk].tenant == "team-a" and jobs[timed.pk].gpus == 2
    # No iteration time given: the profile's ResNet-50 (batch size 128) on 2 GPUs runs 4.223 steps/s;
    # batch 256 is two micro-steps of 128, and samples/s above batch 128 is flat (MODEL.md §1):
    # t(256) = (256 / 128) / 4.223 = 0.473597… s
    assert jobs[estimated.pk].iter_time_s == pytest.approx(2 / 4.223)
    assert jobs[estimated.pk].memory_mb is None
    assert snap.running == ()
    # fixtures: team-a 4 guaranteed, may borrow 2 more; team-c 2 guaranteed, no borrow limit
    assert snap.tenant_quotas == {"team-a": core.TenantQuota(4, 2), "team-c": core.TenantQuota(2, None)}


def test_estimate_matches_the_profile_throughput() -> None:
    profile = load_default_profile()
    # ResNet-50 (batch size 128) on 2 GPUs: 4.223 steps/s → one iteration of batch 128 = 1/4.223 s
    assert service.estimate_iter_time_s(profile, "resnet50", 128, 2) == pytest.approx(1 / 4.223)
    unknown = service.estimate_iter_time_s(profile, "no-such-model", 64, 1)
    assert unknown == service.UNKNOWN_MODEL_ITER_TIME_S


def test_draining_and_unhealthy_nodes_take_no_new_job(cluster: list[Node], tenant_a: Tenant) -> None:
    Node.objects.filter(pk=cluster[0].pk).update(status=Node.Status.DRAINING)
    Node.objects.filter(pk=cluster[1].pk).update(status=Node.Status.UNHEALTHY)
    assert service.build_snapshot().cluster.healthy_gpus == 0


# --------------------------------------------------------------------------------------- rounds


def test_round_places_pending_jobs_and_records_why(
    cluster: list[Node], tenant_a: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    a = make_job(tenant_a, "a", gpus=2, iteration_time_s=0.2)
    b = make_job(tenant_a, "b", gpus=4, iteration_time_s=0.2)
    huge = make_job(tenant_a, "huge", gpus=16, iteration_time_s=0.2)
    record = round_now(django_capture_on_commit_callbacks, policy="sjf-bsbf")
    assert record is not None and record.pk is not None
    assert (record.policy, record.n_started, record.n_waiting, record.n_preempted) == ("sjf-bsbf", 2, 1, 0)
    by_job = {d["job_id"]: d for d in record.decision_list()}
    assert set(by_job) == {a.pk, b.pk, huge.pk}
    assert by_job[huge.pk]["action"] == "wait"
    assert by_job[huge.pk]["reason"].startswith("needs 16 GPUs but the cluster has only 8 healthy GPUs")
    for job in (a, b):
        decision = by_job[job.pk]
        job.refresh_from_db()
        rows = list(Placement.objects.filter(job=job, active=True).select_related("gpu__node"))
        assert job.status == Job.Status.RUNNING and job.started_at is not None
        assert decision["action"] == "start" and len(rows) == job.gpus
        assert sorted(decision["gpu_ids"]) == sorted(r.gpu_id for r in rows)
        assert sorted(decision["gpus"]) == sorted(f"{r.gpu.node.name}:{r.gpu.index}" for r in rows)
        assert decision["sub_batch"] * decision["accum_steps"] == 128
        assert {r.generation for r in rows} == {1} and {r.slot for r in rows} == {0}
        assert decision["reason"].startswith("exclusive on idle")
        placed = JobEvent.objects.get(job=job, kind=JobEvent.Kind.PLACED)
        assert placed.data["generation"] == 1 and placed.data["gpus"] == decision["gpus"]
    assert Job.objects.get(pk=huge.pk).status == Job.Status.PENDING
    assert record.phases_ms.keys() == {"snapshot", "policy", "persist", "commit", "dispatch"}
    # one start message per (job, node); the 2-GPU and the 4-GPU job each fit on one node
    assert sorted((m["job_id"], m["action"], len(m["gpu_indices"])) for m in sent) == [
        (a.pk, "start", 2),
        (b.pk, "start", 4),
    ]


def test_start_message_follows_the_agent_contract(
    cluster: list[Node], tenant_a: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = make_job(
        tenant_a,
        "gang",
        gpus=6,
        batch_size=96,
        iterations=500,
        iteration_time_s=0.3,
        command="python train.py --lr 0.1",
    )
    Job.objects.filter(pk=job.pk).update(iterations_done=40)
    round_now(django_capture_on_commit_callbacks, policy="fifo")
    # 6 GPUs on two 4-GPU nodes: the fewest nodes, one message per node, one generation for both
    assert len(sent) == 2
    assert sorted(m["node"] for m in sent) == ["node-00", "node-01"]
    assert sorted(len(m["gpu_indices"]) for m in sent) == [2, 4]
    placements = Placement.objects.filter(job=job, active=True).select_related("gpu__node")
    for message in sent:
        assert message["gpu_indices"] == sorted(
            p.gpu.index for p in placements if p.gpu.node.name == message["node"]
        )
        assert message["job_id"] == job.pk and message["generation"] == 1 and message["action"] == "start"
        assert message["sub_batch"] * message["accum_steps"] == message["batch_size"] == 96
        assert message["iterations"] == 500 and message["iterations_done"] == 40
        assert message["slowdown"] == 1.0 and message["command"] == "python train.py --lr 0.1"
        # t_j(b) at the full batch is the job's own iteration time
        assert message["sub_batch"] == 96 and message["iter_time_s"] == 0.3


def test_unhealthy_gpus_are_skipped(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    """TESTING.md scenario: GPUs 6–7 unhealthy; a 6-GPU and a 2-GPU job arrive: the 6-GPU job runs on
    healthy GPUs, the 2-GPU job waits (FIFO: the 6-GPU job arrived first)."""
    bad = set(GPU.objects.filter(node=cluster[1], index__in=[2, 3]).values_list("pk", flat=True))
    GPU.objects.filter(pk__in=bad).update(healthy=False)
    six = make_job(tenant_a, "six", gpus=6, iteration_time_s=0.1)
    two = make_job(tenant_a, "two", gpus=2, iteration_time_s=0.1)
    record = round_now(django_capture_on_commit_callbacks, policy="fifo")
    used = set(Placement.objects.filter(job=six, active=True).values_list("gpu_id", flat=True))
    assert len(used) == 6 and not used & bad
    assert not Placement.objects.filter(job=two).exists()
    assert {d["job_id"]: d["action"] for d in record.decision_list()} == {six.pk: "start", two.pk: "wait"}


def test_two_gangs_for_the_whole_cluster_one_runs(
    cluster: list[Node], tenant_c: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    """TESTING.md scenario (8 GPUs here): two 8-GPU gangs in one round; exactly one runs.
    team-c (2 guaranteed, unlimited borrowing, the only tenant) may borrow the other 6 GPUs."""
    first = make_job(tenant_c, "first", gpus=8, iteration_time_s=0.1)
    second = make_job(tenant_c, "second", gpus=8, iteration_time_s=0.1, iterations=2000)
    round_now(django_capture_on_commit_callbacks, policy="sjf")
    assert Placement.objects.filter(job=first, active=True).count() == 8
    assert Placement.objects.filter(job=second).count() == 0


def test_a_gang_is_placed_whole_or_not_at_all(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    full = make_job(tenant_a, "full", gpus=1, iteration_time_s=0.1, gpu_memory_mb=4000)
    other = make_job(tenant_a, "other", gpus=1, iteration_time_s=0.1, gpu_memory_mb=4000)
    gang = make_job(tenant_a, "gang", gpus=4, iteration_time_s=0.1, gpu_memory_mb=4000)
    # GPU 0 gets two jobs; then a 4-GPU start that names GPU 0 again must write none of its 4 rows
    policy = FixedPolicy(
        starts=(
            core.Start(full.pk, (0,), 128, 1),
            core.Start(other.pk, (0,), 128, 1),
            core.Start(gang.pk, (0, 1, 2, 3), 128, 1),
        )
    )
    record = round_now(django_capture_on_commit_callbacks, policy=policy)
    gpu0 = service.load_state().gpu_pks[0]
    assert sorted(Placement.objects.filter(gpu_id=gpu0, active=True).values_list("slot", flat=True)) == [0, 1]
    assert not Placement.objects.filter(job=gang).exists()
    assert Job.objects.get(pk=gang.pk).status == Job.Status.PENDING
    waits = [d for d in record.decision_list() if d["action"] == "wait"]
    assert waits == [
        {
            "job_id": gang.pk,
            "action": "wait",
            "gpu_ids": [],
            "gpus": [],
            "sub_batch": None,
            "accum_steps": None,
            "shares": [],
            "reason": "GPU node-00:0 already holds two jobs",
        }
    ]
    assert (record.n_started, record.n_waiting) == (2, 1)
    assert_invariants()


def test_a_job_cancelled_during_the_round_is_not_placed(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    job = make_job(tenant_a, "late", iteration_time_s=0.1)

    class CancelWhileDeciding(FixedPolicy):
        def decide(self, snapshot: core.Snapshot, profile: core.Profile, *, explain: bool = True):
            Job.objects.get(pk=job.pk).cancel(by="alice")
            return super().decide(snapshot, profile, explain=explain)

    record = round_now(
        django_capture_on_commit_callbacks,
        policy=CancelWhileDeciding(starts=(core.Start(job.pk, (0,), 128, 1),)),
    )
    assert not Placement.objects.filter(job=job).exists()
    assert Job.objects.get(pk=job.pk).status == Job.Status.CANCELLED
    assert record.decision_list()[0]["action"] == "wait" and record.n_started == 0


def test_sharing_writes_slot_1_and_updates_the_partner(
    db: None, tenant_a: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """One 49,140 MB GPU: a long resident, then a short job that SJF-BSBF co-locates with it.

    The short job goes in slot 1 with the same generation rule; the resident gets an ``update``
    (generation 2) whose slowdown is the ξ the policy predicted for it (its ``xi_partner``)."""
    Node.register("solo", 1, 49_140, "v100")
    resident = make_job(
        tenant_a, "resident", model="resnet18", batch_size=64, iterations=1_000_000, iteration_time_s=0.1
    )
    round_now(django_capture_on_commit_callbacks, policy="sjf-bsbf")
    sent.clear()
    short = make_job(tenant_a, "short", model="resnet18", batch_size=64, iterations=100, iteration_time_s=0.1)
    record = round_now(django_capture_on_commit_callbacks, policy="sjf-bsbf")
    decision = record.decision_list()[0]
    assert decision["action"] == "start" and decision["job_id"] == short.pk
    (share,) = decision["shares"]
    assert share["partner_id"] == resident.pk and share["t_con_s"] < share["t_seq_s"]
    assert list(Placement.objects.filter(active=True).order_by("slot").values_list("job_id", "slot")) == [
        (resident.pk, 0),
        (short.pk, 1),
    ]
    messages = {m["job_id"]: m for m in sent}
    assert messages[short.pk]["action"] == "start" and messages[short.pk]["generation"] == 1
    assert messages[short.pk]["slowdown"] == pytest.approx(share["xi_self"])
    assert messages[resident.pk]["action"] == "update" and messages[resident.pk]["generation"] == 2
    assert messages[resident.pk]["slowdown"] == pytest.approx(share["xi_partner"])
    assert Placement.objects.get(job=resident, active=True).generation == 2
    assert max(active_per_gpu().values()) == 2


def test_preemption_stops_requeues_and_the_next_start_is_newer(
    cluster: list[Node], tenant_a: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = make_job(tenant_a, "victim", gpus=2, iteration_time_s=0.1)
    place(django_capture_on_commit_callbacks, job, (0, 1))
    record = round_now(
        django_capture_on_commit_callbacks,
        policy=FixedPolicy(preemptions=(core.Preempt(job.pk, "shorter job waiting"),)),
    )
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING and record.n_preempted == 1
    assert not Placement.objects.filter(job=job, active=True).exists()
    assert set(Placement.objects.filter(job=job).values_list("generation", flat=True)) == {2}
    assert [(m["action"], m["generation"]) for m in sent[1:]] == [("stop", 2)]
    assert JobEvent.objects.get(job=job, kind=JobEvent.Kind.PREEMPTED).data == {"generation": 2}
    first_start = job.started_at
    place(django_capture_on_commit_callbacks, job, (4, 5))
    assert [(m["action"], m["generation"], m["node"]) for m in sent[2:]] == [("start", 3, "node-01")]
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING and job.started_at == first_start  # the first start is kept


def test_running_jobs_appear_in_the_next_snapshot(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    job = make_job(tenant_a, "runner", gpus=2, iteration_time_s=0.1)
    place(django_capture_on_commit_callbacks, job, (2, 3), sub_batch=64)
    (running,) = service.build_snapshot().running
    assert running.job.id == job.pk and running.placement.gpu_ids == (2, 3)
    assert running.placement.sub_batch == 64


def test_rerunning_a_round_places_nothing_twice(
    cluster: list[Node], tenant_a: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    for i in range(3):
        make_job(tenant_a, f"j{i}", gpus=2, iteration_time_s=0.1)
    first = round_now(django_capture_on_commit_callbacks)
    rows, messages = Placement.objects.count(), len(sent)
    second = round_now(django_capture_on_commit_callbacks)
    third = round_now(django_capture_on_commit_callbacks)
    assert first.n_started == 3 and rows == 6 and messages == 3
    assert (second.n_started, Placement.objects.count(), len(sent)) == (0, 6, 3)
    # the second round (nothing pending) is recorded once; the identical third is not stored again
    assert second.pk is not None and third.pk is None and Round.objects.count() == 2
    assert_invariants()


def test_a_second_round_while_one_runs_returns_none(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    make_job(tenant_a, "j", iteration_time_s=0.1)
    inner: list[Round | None] = []

    class Reentrant(FixedPolicy):
        def decide(self, snapshot: core.Snapshot, profile: core.Profile, *, explain: bool = True):
            inner.append(service.run_round(policy=FixedPolicy()))  # as if another worker started one
            return super().decide(snapshot, profile, explain=explain)

    outer = round_now(django_capture_on_commit_callbacks, policy=Reentrant())
    assert inner == [None] and outer is not None
    assert SchedulerLease.objects.get(name=service.ROUND_LEASE).holder == ""  # released
    assert round_now(django_capture_on_commit_callbacks, policy=FixedPolicy()) is not None


def test_an_expired_lease_is_taken_over(db: None) -> None:
    expired = timezone.now() - timedelta(seconds=1)
    SchedulerLease.objects.create(name="t", holder="dead-worker", expires_at=expired)
    lease = service.RoundLease("t")
    assert lease.acquire()
    assert SchedulerLease.objects.get(name="t").holder == lease.holder
    assert not service.RoundLease("t").acquire()
    lease.release()
    assert SchedulerLease.objects.get(name="t").holder == ""


def test_gpus_never_hold_more_than_two_jobs_over_many_rounds(
    db: None, tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    Node.register("pair", 2, 49_140, "v100")
    for i in range(6):
        make_job(
            tenant_a, f"j{i}", model="resnet18", batch_size=64, iterations=10 ** (6 - i), iteration_time_s=0.1
        )
    for _ in range(3):
        round_now(django_capture_on_commit_callbacks, policy="sjf-bsbf")
    per_gpu = active_per_gpu()
    assert per_gpu and max(per_gpu.values()) <= 2
    # a job is on a GPU at most once, and a running job holds all its GPUs (gang of 1 here)
    assert (
        not Placement.objects.filter(active=True)
        .values("job_id", "gpu_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .exists()
    )
    running = Job.objects.filter(status=Job.Status.RUNNING)
    assert all(Placement.objects.filter(job=j, active=True).count() == j.gpus for j in running)
    assert_invariants()


def test_only_the_latest_rounds_are_kept(
    cluster: list[Node], tenant_a: Tenant, django_capture_on_commit_callbacks: Callable
) -> None:
    jobs = [make_job(tenant_a, f"j{i}", iteration_time_s=0.1) for i in range(4)]
    with override_settings(SHAREWISE_ROUNDS_KEPT=2):
        recorded = [place(django_capture_on_commit_callbacks, job, (i,)).pk for i, job in enumerate(jobs)]
    # four rounds that each started a job: the two latest remain
    assert list(Round.objects.order_by("pk").values_list("pk", flat=True)) == recorded[2:]


def test_a_cancelled_job_is_stopped_with_a_newer_generation(
    cluster: list[Node], tenant_a: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = make_job(tenant_a, "gang", gpus=6, iteration_time_s=0.1)
    place(django_capture_on_commit_callbacks, job, (2, 3, 4, 5, 6, 7))  # node-00:2,3 and node-01:0-3
    assert job.cancel(by="alice")
    with django_capture_on_commit_callbacks(execute=True):
        messages = service.stop_job(job.pk)
    expected = [
        {"node": "node-00", "job_id": job.pk, "generation": 2, "action": "stop"},
        {"node": "node-01", "job_id": job.pk, "generation": 2, "action": "stop"},
    ]
    assert messages == expected and sent[2:] == expected
    assert set(Placement.objects.filter(job=job).values_list("generation", "active")) == {(2, False)}
    assert service.stop_job(make_job(tenant_a, "never-ran").pk) == []
