"""Reclaim keeps guarantees and priority classes, through live service rounds (docs/FAIRNESS.md §1,
docs/PRIORITY.md; issue 11 items 1 and 3), on the database under test (SQLite by default,
PostgreSQL with ``DATABASE_URL``). Cluster fixture: two nodes of four 16,000 MB V100s (8 GPUs).
Jobs run ResNet-50 at 0.1 s per iteration; ``iterations`` sets ``P_j``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import override_settings

from cluster.models import Job, Node, Placement, Sharing, Tenant
from tests.service.test_rounds import make_job
from tests.service.test_rounds_quotas import actions, held, round_at

FAIR = override_settings(SHAREWISE_POLICY="sjf-bsbf-fair", SHAREWISE_RECLAIM="preempt")
ALONE = Sharing.NEVER  # no co-location: the GPU counts are then exact


@pytest.fixture
def three_tenants(cluster: list[Node]) -> tuple[Tenant, Tenant, Tenant]:
    """A (4 guaranteed GPUs), B (3) and C (none), all with unlimited borrowing."""
    a, _ = Tenant.create_with_owner("team-ga", quota_gpus=4, username="ga")
    b, _ = Tenant.create_with_owner("team-gb", quota_gpus=3, username="gb")
    c, _ = Tenant.create_with_owner("team-gc", quota_gpus=0, username="gc")
    return a, b, c


@FAIR
def test_reclaim_takes_the_borrower_without_a_guarantee_not_a_guaranteed_gang(
    three_tenants: tuple[Tenant, Tenant, Tenant], django_capture_on_commit_callbacks: Callable
) -> None:
    # the defect, live: A's 5-GPU job is 1 GPU above A's guarantee of 4 and has the most
    # remaining time; C (no guarantee) borrows 1 GPU; B runs 2 of its 3 and submits 1 more
    a, b, c = three_tenants
    big = make_job(a, "a-big", sharing=ALONE, gpus=5, iterations=100_000, iteration_time_s=0.1)
    assert actions(round_at(django_capture_on_commit_callbacks, 1))[big.pk][0] == "start"
    b_two = make_job(b, "b-two", sharing=ALONE, gpus=2, iteration_time_s=0.1)
    c_one = make_job(c, "c-one", sharing=ALONE, gpus=1, iteration_time_s=0.1)
    second = actions(round_at(django_capture_on_commit_callbacks, 2))
    assert second[b_two.pk][0] == "start" and second[c_one.pk][0] == "start"
    b_owner = make_job(b, "b-owner", sharing=ALONE, gpus=1, iteration_time_s=0.1)
    third = actions(round_at(django_capture_on_commit_callbacks, 3))
    # C's borrowed GPU goes to B's owner; A keeps its whole 5-GPU gang (5 − 5 < 4 would break A)
    assert third[c_one.pk][0] == "preempt" and "reclaimed" in third[c_one.pk][1]
    assert third[b_owner.pk][0] == "start"
    assert big.pk not in third or third[big.pk][0] != "preempt"
    assert (held(big), held(b_two), held(b_owner), held(c_one)) == (5, 2, 1, 0)
    freed = set(Placement.objects.filter(job=c_one, active=False).values_list("gpu_id", flat=True))
    assert set(Placement.objects.filter(job=b_owner, active=True).values_list("gpu_id", flat=True)) == freed


@FAIR
def test_a_high_priority_job_starts_in_the_round_it_arrives_by_preempting_borrowed_work(
    three_tenants: tuple[Tenant, Tenant, Tenant], django_capture_on_commit_callbacks: Callable
) -> None:
    # A holds its 4 guaranteed GPUs; C (no guarantee) borrows the other 4 as two 2-GPU jobs of
    # priority 0. A's 2-GPU job of priority 5 would borrow: only lower-priority borrowed work
    # stands in its way, so one of C's jobs (the one with more remaining time) is preempted and
    # A's job starts in that same round
    a, _, c = three_tenants
    own = make_job(a, "a-own", sharing=ALONE, gpus=4, iterations=100_000, iteration_time_s=0.1)
    c_long = make_job(c, "c-long", sharing=ALONE, gpus=2, iterations=90_000, iteration_time_s=0.1)
    c_short = make_job(c, "c-short", sharing=ALONE, gpus=2, iterations=50_000, iteration_time_s=0.1)
    first = actions(round_at(django_capture_on_commit_callbacks, 1))
    assert {first[j.pk][0] for j in (own, c_long, c_short)} == {"start"}
    same = make_job(a, "a-same", sharing=ALONE, gpus=2, iteration_time_s=0.1)  # priority 0: waits
    second = actions(round_at(django_capture_on_commit_callbacks, 2))
    assert second[same.pk][0] == "wait" and second.get(c_long.pk, ("",))[0] != "preempt"
    urgent = make_job(a, "a-urgent", sharing=ALONE, gpus=2, iteration_time_s=0.1, priority=5)
    third = actions(round_at(django_capture_on_commit_callbacks, 3))
    assert third[c_long.pk][0] == "preempt" and "priority 5" in third[c_long.pk][1]
    assert third[urgent.pk][0] == "start" and third[same.pk][0] == "wait"
    assert (held(own), held(urgent), held(c_short), held(c_long)) == (4, 2, 2, 0)
    assert Job.objects.get(pk=c_long.pk).status == Job.Status.PENDING
