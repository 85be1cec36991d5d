"""Multi-tenancy in service rounds (docs/FAIRNESS.md §1–2): quotas from the ``Quota`` rows and the
scheduler settings reach the policy. Cluster fixture: node-00 and node-01, four 16,000 MB V100s
each (8 GPUs). Every job here runs 1,000 iterations of 0.1 s: P_j = 100 s."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils import timezone

from cluster.models import Job, Node, Placement, Quota, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.models import Round
from tests.service.test_rounds import make_job

REPO = Path(__file__).resolve().parents[2]


def round_at(capture: Callable, seconds: float) -> Round:
    """A round ``seconds`` from now, under the configured policy, with its after-commit dispatch."""
    with capture(execute=True):
        record = service.run_round(now=timezone.now() + timedelta(seconds=seconds))
    assert record is not None
    return record


def actions(record: Round) -> dict[int, tuple[str, str]]:
    return {d["job_id"]: (d["action"], d["reason"]) for d in record.decision_list()}


def held(job: Job) -> int:
    return Placement.objects.filter(job=job, active=True).count()


@pytest.fixture
def two_tenants(cluster: list[Node]) -> tuple[Tenant, Tenant]:
    """Tenants A and B, 4 guaranteed GPUs each, unlimited borrowing: 4 + 4 = the 8 GPUs."""
    a, _ = Tenant.create_with_owner("team-qa", quota_gpus=4, username="qa")
    b, _ = Tenant.create_with_owner("team-qb", quota_gpus=4, username="qb")
    return a, b


@override_settings(SHAREWISE_POLICY="sjf-bsbf-fair", SHAREWISE_RECLAIM="preempt")
def test_owner_reclaims_borrowed_gpus_by_preemption(
    two_tenants: tuple[Tenant, Tenant], django_capture_on_commit_callbacks: Callable
) -> None:
    a, b = two_tenants
    own = make_job(a, "a-own", gpus=4, iteration_time_s=0.1)
    first = round_at(django_capture_on_commit_callbacks, 1)
    assert actions(first)[own.pk][0] == "start" and held(own) == 4  # u_A = 4 ≤ g_A = 4
    borrowed = make_job(a, "a-borrowed", gpus=4, iteration_time_s=0.1)
    second = round_at(django_capture_on_commit_callbacks, 2)
    # u_A = 4 + 4 = 8 > g_A = 4: borrowed; no other tenant waits, so nothing is kept idle for one
    assert actions(second)[borrowed.pk][0] == "start" and held(borrowed) == 4
    owner = make_job(b, "b-owner", gpus=4, iteration_time_s=0.1)
    third = round_at(django_capture_on_commit_callbacks, 3)
    # B wants 4 ≤ g_B − u_B = 4 − 0, no GPU idle: A's borrowed job (started last) is preempted
    # and B's job starts on the 4 GPUs it frees; A keeps its guaranteed 4
    got = actions(third)
    assert got[borrowed.pk][0] == "preempt" and "reclaimed" in got[borrowed.pk][1]
    assert got[owner.pk][0] == "start"
    assert third.n_preempted == 1 and third.n_started == 1
    assert (held(own), held(borrowed), held(owner)) == (4, 0, 4)
    assert Job.objects.get(pk=borrowed.pk).status == Job.Status.PENDING
    freed = set(Placement.objects.filter(job=borrowed, active=False).values_list("gpu_id", flat=True))
    assert set(Placement.objects.filter(job=owner, active=True).values_list("gpu_id", flat=True)) == freed
    # back in the queue: its wait (aging, starvation bound) counts from the preemption, not the submit
    waiting = {j.id: j for j in service.build_snapshot().pending}
    assert set(waiting) == {borrowed.pk}
    assert waiting[borrowed.pk].queued_since == pytest.approx(third.started_at.timestamp())
    assert waiting[borrowed.pk].waiting_since > waiting[borrowed.pk].submit_time


@override_settings(SHAREWISE_POLICY="sjf-bsbf-fair", SHAREWISE_RECLAIM="preempt")
def test_borrow_limit_zero_keeps_the_second_job_waiting(
    two_tenants: tuple[Tenant, Tenant], django_capture_on_commit_callbacks: Callable
) -> None:
    a, _ = two_tenants
    Quota.objects.filter(tenant=a).update(borrow_limit=0)
    one = make_job(a, "a-1", gpus=4, iteration_time_s=0.1)
    two = make_job(a, "a-2", gpus=4, iteration_time_s=0.1)
    record = round_at(django_capture_on_commit_callbacks, 1)
    got = actions(record)
    # the first fits the guarantee (4 ≤ 4); the second would make 4 + 4 = 8 > cap 4 + 0 = 4
    started = [job for job in (one, two) if got[job.pk][0] == "start"]
    waiting = [job for job in (one, two) if got[job.pk][0] == "wait"]
    assert len(started) == 1 and len(waiting) == 1 and held(started[0]) == 4
    assert got[waiting[0].pk][1].endswith(
        "tenant team-qa would hold 8 GPUs, above its quota cap of 4 (4 guaranteed + 0 borrowable)"
    )


def test_quota_rows_are_summed_over_gpu_types(two_tenants: tuple[Tenant, Tenant]) -> None:
    a, b = two_tenants
    Quota.objects.filter(tenant=a).update(borrow_limit=1)
    Quota.objects.create(tenant=a, guaranteed_gpus=2, borrow_limit=3, gpu_type="a100")
    Quota.objects.create(tenant=b, guaranteed_gpus=1, borrow_limit=2, gpu_type="a100")
    # A: 4 + 2 = 6 guaranteed, 1 + 3 = 4 borrowable; B: 4 + 1 = 5, one row unlimited → unlimited
    assert service.tenant_quotas() == {
        "team-qa": core.TenantQuota(6, 4),
        "team-qb": core.TenantQuota(5, None),
    }


@override_settings(
    SHAREWISE_STARVATION_BOUND_S=7200.0,
    SHAREWISE_AGING_S=600.0,
    SHAREWISE_RECLAIM="both",
    SHAREWISE_BORROW_BOUND_S=900.0,
)
def test_settings_reach_the_snapshot(cluster: list[Node]) -> None:
    config = service.build_snapshot().config
    assert (config.starvation_bound_s, config.aging_s, config.reclaim, config.borrow_bound_s) == (
        7200.0,
        600.0,
        "both",
        900.0,
    )


def test_default_settings_are_the_documented_ones(cluster: list[Node]) -> None:
    config = service.build_snapshot().config
    # FAIRNESS.md: 48 h = 172,800 s bound, 1 h aging, reclaim by preemption, 1 h borrow bound
    assert (config.starvation_bound_s, config.aging_s, config.reclaim, config.borrow_bound_s) == (
        172800.0,
        3600.0,
        "preempt",
        3600.0,
    )


@pytest.mark.parametrize("name, value", [("SHAREWISE_RECLAIM", "never"), ("SHAREWISE_AGING_S", 0.0)])
def test_bad_scheduler_setting_is_improperly_configured(name: str, value: object) -> None:
    field = name.split("_", 1)[1].lower()  # SHAREWISE_AGING_S → the core's aging_s
    with override_settings(**{name: value}), pytest.raises(ImproperlyConfigured, match=field):
        service.scheduler_config()


def test_settings_module_rejects_an_unknown_reclaim_mode() -> None:
    env = {**os.environ, "SHAREWISE_RECLAIM": "sometimes", "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "SHAREWISE_RECLAIM must be one of preempt, bound, both; got 'sometimes'" in done.stderr


def test_settings_module_rejects_an_unknown_policy() -> None:
    env = {**os.environ, "SHAREWISE_POLICY": "sjf-bsbf-fairx", "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert (
        "SHAREWISE_POLICY must be one of fifo, sjf, srtf, tiresias, sjf-ffs, sjf-bsbf, sjf-bsbf-fair; "
        "got 'sjf-bsbf-fairx'"
    ) in done.stderr
