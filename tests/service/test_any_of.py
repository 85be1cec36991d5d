"""``cluster.expressions.AnyOf``: the rows whose column is one of the values, as Django's ``__in``
gives them (an array parameter on PostgreSQL, an ``IN`` list elsewhere).

Jobs: five pending jobs of tenant team-a, on nodes node-00 and node-01.
"""

from __future__ import annotations

import pytest
from django.db.models import F

from cluster.expressions import AnyOf
from cluster.models import Job, Node, Tenant
from tests.service.learning_helpers import make_fleet, make_job


@pytest.fixture
def job_ids(db: None) -> list[int]:
    tenant = Tenant.create_with_owner("team-a", quota_gpus=8)[0]
    return [make_job(tenant, f"j{i}").pk for i in range(5)]


def test_the_rows_of_the_listed_ids_and_no_other(job_ids: list[int]) -> None:
    chosen = [job_ids[3], job_ids[0], job_ids[3]]  # any order, a repeat
    found = set(Job.objects.filter(AnyOf(F("pk"), chosen)).values_list("pk", flat=True))
    assert found == {job_ids[0], job_ids[3]}
    assert found == set(Job.objects.filter(pk__in=chosen).values_list("pk", flat=True))


def test_combined_with_other_conditions_and_an_update(job_ids: list[int]) -> None:
    Job.objects.filter(pk=job_ids[1]).update(status=Job.Status.CANCELLED)
    changed = Job.objects.filter(AnyOf(F("pk"), job_ids[:3]), status=Job.Status.PENDING).update(priority=7)
    assert changed == 2  # jobs 0 and 2: job 1 is no longer pending
    assert list(Job.objects.filter(priority=7).order_by("pk").values_list("pk", flat=True)) == [
        job_ids[0],
        job_ids[2],
    ]


def test_an_empty_list_matches_nothing(job_ids: list[int]) -> None:
    assert not Job.objects.filter(AnyOf(F("pk"), [])).exists()


def test_strings(db: None) -> None:
    make_fleet()
    names = Node.objects.filter(AnyOf(F("name"), ["node-01", "node-09"])).values_list("name", flat=True)
    assert list(names) == ["node-01"]


def test_ints_on_a_bigint_key_and_a_narrower_column(job_ids: list[int]) -> None:
    # plain ints go as one bigint[] literal on PostgreSQL: an id past 2**31 is no error, and an
    # integer column narrower than the key compares with it
    found = Job.objects.filter(AnyOf(F("pk"), [job_ids[1], 2**62])).values_list("pk", flat=True)
    assert list(found) == [job_ids[1]]
    assert Job.objects.filter(AnyOf(F("priority"), [0, 3])).count() == 5  # every priority is 0
