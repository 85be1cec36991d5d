"""A job's priority through /api/v1/jobs/: stored, shown in the list and the detail, and refused
outside −100…100 with a message naming the bound."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from cluster.models import Job
from tests.api.conftest import JOBS_URL, job_body


def test_priority_is_shown_in_the_list_and_the_detail(alice_api: APIClient) -> None:
    urgent = alice_api.post(JOBS_URL, job_body(name="urgent", priority=100), format="json").json()
    plain = alice_api.post(JOBS_URL, job_body(name="plain"), format="json").json()
    low = alice_api.post(JOBS_URL, job_body(name="low", priority=-100), format="json").json()
    listing = alice_api.get(JOBS_URL).json()["results"]
    assert {j["name"]: j["priority"] for j in listing} == {"urgent": 100, "plain": 0, "low": -100}
    for body, expected in ((urgent, 100), (plain, 0), (low, -100)):
        assert alice_api.get(f"{JOBS_URL}{body['id']}/").json()["priority"] == expected
    assert Job.objects.get(pk=urgent["id"]).priority == 100


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (101, "priority: Ensure this value is less than or equal to 100."),
        (-101, "priority: Ensure this value is greater than or equal to -100."),
        ("5", "priority: "),
        (2.5, "priority: "),
        (None, "priority: "),
    ],
)
def test_priority_out_of_range_is_400_with_a_message(
    alice_api: APIClient, value: object, message: str
) -> None:
    response = alice_api.post(JOBS_URL, job_body(priority=value), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"].startswith(f"invalid input: {message}")
    assert not Job.objects.exists()
