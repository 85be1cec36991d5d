"""The dashboard's quota columns (docs/FAIRNESS.md §1, "Over quota"): borrowed GPUs are those
above the guarantee within the borrow limit; GPUs above the cap are over quota, not borrowed."""

from __future__ import annotations

from typing import Any

from django.test import Client

from cluster.models import Job, Node, Quota
from tests.frontend.conftest import gpu, make_job, place
from tests.frontend.test_endpoints import get, table


def test_gpus_above_a_zero_borrow_limit_are_over_quota_not_borrowed(
    cluster: list[Node], tenant_c: Any, admin_web: Client
) -> None:
    big = make_job(tenant_c, "c-big", gpus=3)
    for index in range(3):
        place(big, gpu("node-00", index))
    # the admin lowers team-c's quota to 1 guaranteed GPU, no borrowing, while it runs 3
    Quota.objects.filter(tenant=tenant_c).update(guaranteed_gpus=1, borrow_limit=0)
    row = {r["tenant"]: r for r in table(get(admin_web, "fairness"), "tenants")}["team-c"]
    # held 3, guaranteed 1, cap 1 + 0 = 1: borrowed 0 (it may borrow none), over quota 3 − 1 = 2
    assert (row["GPUs held now"], row["GPUs borrowed now"], row["GPUs over quota now"]) == (3, 0, 2)
    assert Job.objects.get(pk=big.pk).status == Job.Status.RUNNING
