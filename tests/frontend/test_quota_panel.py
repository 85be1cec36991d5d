"""The dashboard's quota columns (docs/FAIRNESS.md §1, "Over quota"): borrowed GPUs are those
above the guarantee within the borrow limit; GPUs above the cap are over quota, not borrowed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from cluster.models import Job, Node, Quota
from tests.api.test_usage_windows import share_one_gpu
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


def test_the_panel_shows_windowed_gpu_hours_and_fairness_scoped_to_the_viewer(
    cluster: list[Node], tenant_a: Any, tenant_c: Any, admin_web: Client, alice_web: Client
) -> None:
    share_one_gpu(tenant_a, tenant_c)  # tests/api/test_usage_windows.py: 1.75 and 0.25 GPU-h in 2 h
    admin = get(admin_web, "quota")
    rows = {r["tenant"]: r for r in table(admin, "quota_windows")}
    assert rows["team-a"]["GPU-hours (last 2 h)"] == pytest.approx(1.75, abs=1e-3)
    assert rows["team-a"]["guaranteed GPU-hours (last 2 h)"] == 8.0
    assert rows["team-a"]["share of guarantee (last 2 h)"] == pytest.approx(0.219, abs=1e-3)
    assert rows["team-c"]["GPU-hours (last 24 h)"] == pytest.approx(0.25, abs=1e-3)
    # team-a holds 1 GPU of 4 guaranteed: nothing borrowed or over quota
    assert (rows["team-a"]["GPUs held now"], rows["team-a"]["GPUs over quota now"]) == (1, 0)
    fair = {r["window"]: r for r in table(admin, "window_fairness")}
    # x_a = 1.75 / 4, x_c = 0.25 / 2: Jain 0.764, max/min 3.5; in 24 h nobody had work for 12 h
    assert fair["last 2 h"]["Jain's index"] == pytest.approx(0.764, abs=2e-3)
    assert fair["last 2 h"]["tenants compared"] == "team-a, team-c"
    assert fair["last 24 h"]["Jain's index"] is None
    assert admin["summary"].startswith("No tenant is over quota. Windowed Jain's index")
    mine = get(alice_web, "quota")
    assert [r["tenant"] for r in table(mine, "quota_windows")] == ["team-a"]
    assert "team-c" not in json.dumps(mine)
    assert {r["window"]: r for r in table(mine, "window_fairness")}["last 2 h"]["tenants compared"] == 2


def test_over_quota_tenants_are_named_in_the_summary(
    cluster: list[Node], tenant_c: Any, admin_web: Client
) -> None:
    big = make_job(tenant_c, "c-big", gpus=3)
    for index in range(3):
        place(big, gpu("node-00", index))
    Quota.objects.filter(tenant=tenant_c).update(guaranteed_gpus=1, borrow_limit=0)
    body = get(admin_web, "quota")
    assert body["summary"].startswith("Over quota: team-c (2 GPUs).")
    row = table(body, "quota_windows")[0]
    assert (row["GPUs borrowed now"], row["GPUs over quota now"], row["over quota per GPU type"]) == (
        0,
        2,
        "any: 2",
    )


def test_the_queue_shows_each_jobs_priority(cluster: list[Node], tenant_c: Any, admin_web: Client) -> None:
    make_job(tenant_c, "c-urgent", priority=50)
    make_job(tenant_c, "c-plain")
    rows = table(get(admin_web, "queue"), "queue")
    assert [(r["job"].split()[-1], r["priority"]) for r in rows] == [("c-urgent", 50), ("c-plain", 0)]


def test_the_queue_shows_each_jobs_gpu_types(cluster: list[Node], tenant_c: Any, admin_web: Client) -> None:
    make_job(tenant_c, "c-typed", gpu_types=["a100", "v100"])
    make_job(tenant_c, "c-any")
    body = get(admin_web, "queue")
    rows = table(body, "queue")
    assert [(r["job"].split()[-1], r["GPU types"]) for r in rows] == [
        ("c-typed", "a100, v100"),
        ("c-any", "any"),
    ]
    hover = body["figures"]["queue"]["data"][0]["hovertext"]
    assert [h.split("), ")[1].split(", waiting")[0] for h in hover] == [
        "1 GPUs of type a100 or v100",
        "1 GPUs",
    ]
