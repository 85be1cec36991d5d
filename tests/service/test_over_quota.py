"""Over quota through live rounds (docs/FAIRNESS.md §1, "Over quota"): after an admin lowers a
quota below what a tenant runs, the tenant API, the admin API and ``/metrics`` flag it, the quota
gate admits none of its jobs beyond the cap, and its running job is left alone. Cluster fixture:
node-00 and node-01, four V100s each; every job runs 1,000 iterations of 0.1 s."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from cluster.models import Job, Node, Quota, Tenant
from tests.conftest import skip_or_fail
from tests.service.test_rounds import make_job
from tests.service.test_rounds_quotas import actions, held, round_at
from tests.service.test_rounds_tasks import scrape

TENANT_URL, ADMIN_USAGE_URL = "/api/v1/tenant/", "/api/v1/admin/usage/"


def lowered_quota_round(capture: Callable) -> tuple[Tenant, APIClient, Job, Job, dict[int, Any]]:
    """team-qa (4 guaranteed) starts a 2-GPU job; the admin lowers its quota to 1 guaranteed, no
    borrowing; it submits a 1-GPU job and a second round runs. Returns the tenant, its member's
    client, the running and the new job, and the second round's actions."""
    tenant, token = Tenant.create_with_owner("team-qa", quota_gpus=4, username="qa")
    running = make_job(tenant, "a-running", gpus=2, iteration_time_s=0.1)
    assert actions(round_at(capture, 1))[running.pk][0] == "start"
    Quota.objects.filter(tenant=tenant).update(guaranteed_gpus=1, borrow_limit=0)
    new = make_job(tenant, "a-new", gpus=1, iteration_time_s=0.1)
    second = actions(round_at(capture, 2))
    member = APIClient()
    member.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return tenant, member, running, new, second


def check_over_quota(capture: Callable, staff_api: APIClient) -> None:
    tenant, member, running, new, second = lowered_quota_round(capture)
    # no admission beyond the cap: 2 + 1 = 3 > 1 + 0; the running job keeps its 2 GPUs
    assert second[new.pk][0] == "wait"
    assert second[new.pk][1].endswith(
        "tenant team-qa would hold 3 GPUs, above its quota cap of 1 (1 guaranteed + 0 borrowable)"
    )
    assert running.pk not in second or second[running.pk][0] != "preempt"
    assert Job.objects.get(pk=running.pk).status == Job.Status.RUNNING and held(running) == 2
    # holds 2 of cap 1: 0 borrowed (it may borrow none), 2 − 1 = 1 over quota
    expected = {
        "gpus_in_use": 2,
        "guaranteed_gpus": 1,
        "borrow_limit": 0,
        "gpus_borrowed": 0,
        "gpus_over_quota": 1,
        "over_quota": True,
    }
    quota = member.get(TENANT_URL).json()["usage"]["quota"]
    assert quota == {"over_quota": True, "total": expected, "per_gpu_type": [{"gpu_type": "", **expected}]}
    admin = staff_api.get(ADMIN_USAGE_URL)
    assert admin.status_code == 200
    assert [(t["name"], t["quota"]) for t in admin.json()["tenants"]] == [("team-qa", quota)]
    # the admin tenants list flags it too, from the same standing; a tenant within quota is not
    Tenant.create_with_owner("team-ok", quota_gpus=1, username="ok")
    listed = staff_api.get("/api/v1/admin/tenants/")
    assert listed.status_code == 200
    rows = listed.json()
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert sorted((t["name"], t["over_quota"]) for t in rows) == [("team-ok", False), ("team-qa", True)]
    one = staff_api.get(f"/api/v1/admin/tenants/{tenant.pk}/").json()
    assert one["over_quota"] is True
    values = scrape()
    assert values[("sharewise_tenant_over_quota", (("tenant", "team-qa"),))] == 1
    assert values[("sharewise_tenant_over_quota_gpus", (("quota", "total"), ("tenant", "team-qa")))] == 1
    assert values[("sharewise_tenant_over_quota_gpus", (("quota", "any"), ("tenant", "team-qa")))] == 1
    assert values[("sharewise_tenant_borrowed_gpus", (("tenant", "team-qa"),))] == 0


@override_settings(SHAREWISE_POLICY="sjf-bsbf-fair", SHAREWISE_RECLAIM="preempt")
def test_a_lowered_quota_is_flagged_and_admits_nothing_more(
    cluster: list[Node], staff_api: APIClient, django_capture_on_commit_callbacks: Callable
) -> None:
    check_over_quota(django_capture_on_commit_callbacks, staff_api)


@pytest.mark.postgres
@override_settings(SHAREWISE_POLICY="sjf-bsbf-fair", SHAREWISE_RECLAIM="preempt")
def test_a_lowered_quota_is_flagged_on_postgresql(
    cluster: list[Node], staff_api: APIClient, django_capture_on_commit_callbacks: Callable
) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...)")
    check_over_quota(django_capture_on_commit_callbacks, staff_api)


def test_per_gpu_type_rows_are_held_against_their_own_type(
    cluster: list[Node], django_capture_on_commit_callbacks: Callable
) -> None:
    from scheduling import service

    tenant, _ = Tenant.create_with_owner("team-qa", quota_gpus=4, username="qa")
    running = make_job(tenant, "a-running", gpus=2, iteration_time_s=0.1)
    round_at(django_capture_on_commit_callbacks, 1)
    # a v100 row of 1 GPU, no borrowing, beside the any-type row of 4: its 2 V100s are 1 over
    # that row's cap, the any-type row counts no GPU (every GPU it holds has a row of its type)
    Quota.objects.create(tenant=tenant, guaranteed_gpus=1, borrow_limit=0, gpu_type="v100")
    use = service.quota_use([tenant.pk])[tenant.pk]
    assert held(running) == 2
    assert (use.per_type["v100"].gpus_in_use, use.per_type["v100"].gpus_over_quota) == (2, 1)
    assert (use.per_type[""].gpus_in_use, use.per_type[""].gpus_over_quota) == (0, 0)
    # summed: 5 guaranteed, unlimited borrowing (one row has no limit): not over in total
    assert use.total.gpus_over_quota == 0 and use.over_quota


def test_quota_use_counts_a_shared_gpu_as_the_configured_gate_does(cluster: list[Node]) -> None:
    from scheduling import service
    from tests.frontend.conftest import gpu, place

    tenant, _ = Tenant.create_with_owner("team-qa", quota_gpus=1, borrow_limit=0, username="qa")
    one, two = make_job(tenant, "a-one"), make_job(tenant, "a-two")
    place(one, gpu("node-00", 0))
    place(two, gpu("node-00", 0), slot=1)  # its own two jobs on one GPU, slowdowns unknown: ½ each
    with override_settings(SHAREWISE_POLICY="sjf-bsbf-fair"):
        split = service.quota_use()[tenant.pk].total
    with override_settings(SHAREWISE_POLICY="sjf-bsbf"):
        gangs = service.quota_use()[tenant.pk].total
    # sjf-bsbf-fair charges the shared GPU once in all: ½ + ½ = 1 ≤ cap 1, not over quota
    assert (split.gpus_in_use, split.gpus_over_quota, split.over_quota) == (1.0, 0.0, False)
    # sjf-bsbf counts each job's gang: 1 + 1 = 2 > cap 1, one over
    assert (gangs.gpus_in_use, gangs.gpus_over_quota, gangs.over_quota) == (2.0, 1.0, True)


def test_quota_use_follows_the_split_charge_switch(cluster: list[Node]) -> None:
    """With SHAREWISE_SPLIT_CHARGE off, sjf-bsbf-fair's gate counts whole gangs, and so does the
    over-quota view: the two jobs on one GPU are 1 + 1 = 2 GPUs against a cap of 1 (one over)."""
    from scheduling import service
    from tests.frontend.conftest import gpu, place

    tenant, _ = Tenant.create_with_owner("team-qa", quota_gpus=1, borrow_limit=0, username="qa")
    one, two = make_job(tenant, "a-one"), make_job(tenant, "a-two")
    place(one, gpu("node-00", 0))
    place(two, gpu("node-00", 0), slot=1)
    with override_settings(SHAREWISE_POLICY="sjf-bsbf-fair", SHAREWISE_SPLIT_CHARGE=False):
        use = service.quota_use()[tenant.pk].total
    assert (use.gpus_in_use, use.gpus_over_quota, use.over_quota) == (2.0, 1.0, True)


def test_a_narrowed_quota_use_keeps_the_other_tenants_partner(cluster: list[Node]) -> None:
    """Narrowed to one tenant (a member's view), its job sharing a GPU with another tenant's still
    gets half of it (the partner's row is read too), as with every tenant; the other tenant's GPU
    of its own changes nothing."""
    from scheduling import service
    from tests.frontend.conftest import gpu, place

    mine, _ = Tenant.create_with_owner("team-qa", quota_gpus=1, borrow_limit=0, username="qa")
    other, _ = Tenant.create_with_owner("team-qb", quota_gpus=1, borrow_limit=0, username="qb")
    place(make_job(mine, "a-one"), gpu("node-00", 0))
    place(make_job(other, "b-one"), gpu("node-00", 0), slot=1)  # slowdowns unknown: ½ each
    place(make_job(other, "b-two"), gpu("node-00", 1))
    with override_settings(SHAREWISE_POLICY="sjf-bsbf-fair"):
        narrowed = service.quota_use([mine.pk])[mine.pk].total
        everyone = service.quota_use()
    assert narrowed == everyone[mine.pk].total
    assert narrowed.gpus_in_use == 0.5 and everyone[other.pk].total.gpus_in_use == 1.5
