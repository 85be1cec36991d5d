"""The dashboard's learning endpoint: predicted vs measured ξ of the running pairs and the prediction
error over time, scoped to the viewer, with the same numbers in its tables.

``shared_cluster``: A's ``a-train`` (ResNet-50, sub-batch 64) and C's ``c-train`` (VGG-16,
sub-batch 32) share node-00:0 (tests/frontend/conftest.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Job, Placement
from scheduling.models import SlowdownObservation
from tests.frontend.test_endpoints import get, table


@pytest.fixture
def measured(shared_cluster: dict[str, Job]) -> dict[str, Job]:
    """a-train predicted ξ 1.30 beside c-train, measured 1.60; c-train predicted 1.60, not measured
    yet; two measured co-locations of a-train, 30 and 10 minutes ago."""
    a, c = shared_cluster["a-train"], shared_cluster["c-train"]
    Placement.objects.filter(job=a).update(shared_with=c.pk, predicted_slowdown=1.3, measured_slowdown=1.6)
    Placement.objects.filter(job=c).update(shared_with=a.pk, predicted_slowdown=1.6)
    now = timezone.now()
    for minutes, generation, predicted, measured in ((30, 1, 2.0, 1.6), (10, 2, 1.3, 1.6)):
        SlowdownObservation.objects.create(
            job=a.pk,
            partner=c.pk,
            generation=generation,
            model_a="resnet50",
            sub_a=64,
            model_b="vgg16",
            sub_b=32,
            predicted=predicted,
            measured=measured,
            samples=3,
            at=now - timedelta(minutes=minutes),
        )
    return shared_cluster


def test_admin_sees_every_pair_and_the_error_over_time(measured: dict[str, Job], admin_web: Client) -> None:
    a, c = measured["a-train"], measured["c-train"]
    body = get(admin_web, "learning")
    assert set(body["figures"]) == {"slowdown_pairs", "prediction_error"}
    pairs = {row["job"]: row for row in table(body, "slowdown_pairs")}
    row = pairs[f"job {a.pk} a-train"]
    assert row["beside"] == f"job {c.pk} c-train" and row["GPUs"] == "node-00:0"
    assert (row["sub-batch"], row["partner sub-batch"]) == (64, 32)
    # |1.30 − 1.60| / 1.60 = 18.75 %
    assert (row["ξ predicted"], row["ξ measured"], row["error %"]) == (1.3, 1.6, 18.8)
    assert pairs[f"job {c.pk} c-train"]["ξ measured"] is None
    # the observations: |2.0 − 1.6| / 1.6 = 25 % 30 min ago, 18.75 % 10 min ago; mean 21.875 %
    observations = table(body, "observations")
    assert [o["error %"] for o in observations] == [18.8, 25.0]  # newest first
    assert "mean prediction error 21.9 %" in body["summary"]
    bins = [b for b in table(body, "prediction_error") if b["co-locations"]]
    assert [(b["co-locations"], b["mean error %"]) for b in bins] == [(1, 25.0), (1, 18.8)]
    points = body["figures"]["prediction_error"]["data"][0]["y"]
    assert points == pytest.approx([25.0, 18.75])


def test_a_member_sees_own_jobs_and_another_tenants_partner_unnamed(
    measured: dict[str, Job], alice_web: Client, charlie_web: Client
) -> None:
    a, c = measured["a-train"], measured["c-train"]
    alice = get(alice_web, "learning")
    assert [(r["job"], r["beside"]) for r in table(alice, "slowdown_pairs")] == [
        (f"job {a.pk} a-train", "another tenant's job")
    ]
    assert {o["beside"] for o in table(alice, "observations")} == {"another tenant's job"}
    assert {o["pair (model@sub-batch)"] for o in table(alice, "observations")} == {
        "resnet50@64 beside another tenant's job"
    }
    assert table(alice, "slowdown_pairs")[0]["partner sub-batch"] is None
    assert "c-train" not in str(alice) and "vgg16" not in str(alice)
    charlie = get(charlie_web, "learning")
    assert [(r["job"], r["beside"]) for r in table(charlie, "slowdown_pairs")] == [
        (f"job {c.pk} c-train", "another tenant's job")
    ]
    assert table(charlie, "observations") == []  # the measured co-locations were a-train's


def test_nothing_to_show(shared_cluster: dict[str, Job], admin_web: Client) -> None:
    body: dict[str, Any] = get(admin_web, "learning")
    assert body["empty"].startswith("No job shares a GPU now")
    bad = admin_web.get("/dashboard/api/learning.json?window=10")
    assert bad.status_code == 400 and "window must be from 300" in bad.json()["error"]
