"""The service learns from what the agents measure (docs/LEARNING.md, "In the service"), on SQLite or
PostgreSQL: measured iteration times reach the next snapshot's SJF key, slowdowns are learned
beside their prediction, and only measurements of the co-location the server believes count.

Fleet: node-00 and node-01, four 16,000 MB V100s each (tests/service/learning_helpers.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from django.utils import timezone

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.core.learning import MAX_WEIGHT, PRIOR_SIGMA
from scheduling.models import JobIterTime, LearnedIterTime, LearnedSlowdown, SlowdownObservation
from scheduling.profiles import load_default_profile
from tests.service.learning_helpers import (
    Fixed,
    generation_of,
    make_fleet,
    make_job,
    report,
    run_round,
    start,
)


@pytest.fixture
def fleet(db: None) -> dict[str, tuple[Node, str]]:
    return make_fleet()


@pytest.fixture
def tenant(db: None) -> Tenant:
    return Tenant.create_with_owner("team-a", quota_gpus=8)[0]


def running(job: Job) -> core.Job:
    """The job as the next snapshot sees it."""
    return service.load_state().jobs[job.pk]


# ------------------------------------------------------------------------ iteration times


def test_a_measured_iteration_time_changes_the_next_snapshots_sjf_key(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = make_job(tenant, "a", iteration_time_s=0.5)  # declared 0.5 s, 1,000 iterations
    run_round(django_capture_on_commit_callbacks, "fifo")  # alone on one GPU, at its full batch 128
    assert running(job).iter_time_s == 0.5 and running(job).remaining_time_s == 500.0  # 1,000 · 0.5
    # the agent measures 1.5 s per iteration (3x slower than declared) after 100 iterations
    answer = report(fleet, job, django_capture_on_commit_callbacks, iterations_done=100, iter_time_s=1.5)
    assert answer.status_code == 200
    seen = running(job)
    assert seen.iter_time_s == pytest.approx(1.5)  # measured for this job beats declared
    assert seen.remaining_time_s == pytest.approx(900 * 1.5)  # P_j = R_j · t_j = 1,350 s
    assert JobIterTime.objects.get(job=job).count == 1
    assert JobEvent.objects.filter(job=job, kind="progress").get().data["learned"] == "exclusive"


def test_the_measurement_reorders_the_queue(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    a = make_job(tenant, "a", gpus=8, iteration_time_s=0.5)  # declared: P_a = 1,000 · 0.5 = 500 s
    b = make_job(tenant, "b", gpus=8, iteration_time_s=0.6)  # P_b = 1,000 · 0.6 = 600 s
    run_round(django_capture_on_commit_callbacks, "fifo")  # a first: the whole cluster
    for node in ("node-00", "node-01"):  # the gang's two nodes measure 1.5 s after 100 iterations
        report(fleet, a, django_capture_on_commit_callbacks, node, iterations_done=100, iter_time_s=1.5)
    service.requeue([a.pk], timezone.now(), "the test puts it back")
    record = run_round(django_capture_on_commit_callbacks, "sjf")
    # now P_a = 900 · 1.5 = 1,350 s > P_b = 600 s: b goes first (declared only, a would have)
    actions = {d["job_id"]: d["action"] for d in record.decision_list()}
    assert actions == {b.pk: "start", a.pk: "wait"}


def test_three_measured_jobs_teach_their_class(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    jobs = [make_job(tenant, f"m{i}", iteration_time_s=1.0) for i in range(3)]
    run_round(django_capture_on_commit_callbacks, "fifo")
    for job, measured in zip(jobs, (0.4, 0.5, 0.625), strict=True):
        report(fleet, job, django_capture_on_commit_callbacks, iterations_done=10, iter_time_s=measured)
    later = make_job(tenant, "later", iteration_time_s=2.0)
    learned = LearnedIterTime.objects.get(model="resnet18", batch_size=128, gpus=1)
    # the geometric mean of the class: (0.4 · 0.5 · 0.625)^(1/3) = 0.125^(1/3) = 0.5 s
    assert learned.count == 3 and learned.stats.mean == pytest.approx(0.5)
    assert running(later).iter_time_s == pytest.approx(0.5)  # learned (≥ 3 samples) beats declared


def test_a_class_counts_each_job_once(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    # one long job reporting three times is one job of its class, not three (else it alone would
    # make a "learned" class time that overrides every other job's declaration)
    job = make_job(tenant, "long", iteration_time_s=1.0)
    run_round(django_capture_on_commit_callbacks, "fifo")
    for done, measured in ((10, 0.4), (20, 0.5), (30, 0.6)):
        report(fleet, job, django_capture_on_commit_callbacks, iterations_done=done, iter_time_s=measured)
    assert JobIterTime.objects.get(job=job).count == 3
    learned = LearnedIterTime.objects.get(model="resnet18", batch_size=128, gpus=1)
    assert learned.count == 1 and learned.stats.mean == pytest.approx(0.4)  # its first report
    later = make_job(tenant, "later", iteration_time_s=2.0)
    assert running(later).iter_time_s == 2.0  # one sample is no class: the declaration stands


# ------------------------------------------------------------------------------- slowdowns


def share_pair(tenant: Tenant, capture: Callable) -> tuple[Job, Job]:
    """ResNet-18 (batch 128) alone on GPU 0, then VGG-19 (batch 16) beside it; both declared
    0.5 s per iteration at their full batch (= their sub-batch)."""
    a = make_job(tenant, "a", iteration_time_s=0.5)
    run_round(capture, Fixed(start(a, (0,))))
    b = make_job(tenant, "b", model="vgg19", batch_size=16, iteration_time_s=0.5)
    run_round(capture, Fixed(start(b, (0,))))
    return a, b


def test_a_shared_pairs_slowdown_is_learned_beside_its_prediction(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    a, b = share_pair(tenant, capture)
    table = load_default_profile()
    ca, cb = service.load_state().jobs[a.pk], service.load_state().jobs[b.pk]
    xi_a, xi_b = table.slowdown(ca, 128, cb, 16)  # nothing learned yet: the shipped table's
    row_b = Placement.objects.get(job=b, active=True)
    assert (row_b.shared_with, row_b.predicted_slowdown, row_b.measured_slowdown) == (a.pk, xi_b, None)
    row_a = Placement.objects.get(job=a, active=True)
    assert (row_a.shared_with, row_a.predicted_slowdown, row_a.generation) == (b.pk, xi_a, 2)
    start_b = next(m for m in sent if m["job_id"] == b.pk and m["action"] == "start")
    assert start_b["slowdown"] == xi_b and start_b["partners"] == [{"model": "resnet18", "sub_batch": 128}]

    # b measures 0.75 s: ξ = 0.75 / 0.5 = 1.5, then 0.9 s: ξ = 1.8
    report(fleet, b, capture, iterations_done=10, iter_time_s=0.75)
    report(fleet, b, capture, iterations_done=20, iter_time_s=0.9)
    learned = LearnedSlowdown.objects.get(model_a="vgg19", sub_a=16, model_b="resnet18", sub_b=128)
    assert learned.count == 2 and learned.stats.mean == pytest.approx(math.sqrt(1.5 * 1.8))
    observation = SlowdownObservation.objects.get(job=b.pk)
    assert (observation.partner, observation.generation, observation.samples) == (a.pk, 1, 2)
    assert observation.predicted == xi_b and observation.measured == pytest.approx((1.5 + 1.8) / 2)
    assert Placement.objects.get(job=b, active=True).measured_slowdown == pytest.approx(1.65)

    # a reports under generation 1 (before the update that told it of b): not counted
    stale = report(fleet, a, capture, generation=1, iterations_done=10, iter_time_s=0.9)
    assert stale.status_code == 200
    assert JobEvent.objects.filter(job=a, kind="progress").get().data["learned"] == "stale"
    report(fleet, a, capture, generation=2, iterations_done=20, iter_time_s=0.61)  # ξ = 1.22
    assert LearnedSlowdown.objects.get(model_a="resnet18").stats.mean == pytest.approx(1.22)

    # the next round's profile: the posterior of docs/LEARNING.md (conjugate normal in ln ξ)
    source = table.slowdown_source(cb, 16, ca, 128)
    sigma_p = PRIOR_SIGMA[source]
    spread = math.log(1.8 / 1.5) / 2  # two samples: the standard deviation of their logs
    sigma_o = max(0.05, spread)
    mean_log = (math.log(1.5) + math.log(1.8)) / 2
    expected = math.exp(
        (math.log(xi_b) / sigma_p**2 + 2 * mean_log / sigma_o**2) / (1 / sigma_p**2 + 2 / sigma_o**2)
    )
    profile = service.learned_profile()
    assert profile.slowdown(cb, 16, ca, 128)[0] == pytest.approx(expected)
    assert profile is service.learned_profile()  # nothing changed: the same object (policy memos stay warm)
    assert learned.stats.weight == 2 < MAX_WEIGHT


def test_a_sample_after_the_partner_left_is_not_counted(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    a, b = share_pair(tenant, capture)
    with capture(execute=False):  # b ends; the update telling a it is alone is not sent yet
        service.release(b, timezone.now(), Job.Status.SUCCEEDED, JobEvent.Kind.SUCCEEDED, "")
    # a still runs as it did beside b; its rows still say "beside b": its time is no sample
    report(fleet, a, capture, iterations_done=10, iter_time_s=0.6)
    assert JobEvent.objects.filter(job=a, kind="progress").get().data["learned"] == "changed"
    assert not LearnedSlowdown.objects.exists() and not JobIterTime.objects.exists()
    # once told (a new generation, alone), its time is an exclusive sample
    service.refresh_partners([a.pk])
    assert Placement.objects.get(job=a, active=True).shared_with is None
    report(fleet, a, capture, generation=generation_of(a), iterations_done=20, iter_time_s=0.45)
    assert JobIterTime.objects.get(job=a).stats.mean == pytest.approx(0.45)
