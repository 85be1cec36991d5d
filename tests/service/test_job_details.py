"""What the API says about a job beyond its row: why it waits and when it may start (the latest
round's reason and estimate), who shares its GPUs, and its history (``/jobs/{id}/events/``).

The cluster fixture: node-00 and node-01, four 16,000 MB V100s each (8 GPUs). Jobs declare 1,000 MB
per GPU and their iteration time, so a job runs at its full batch and its remaining time is
iterations x ``iteration_time_s`` (scheduling.core.eta).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from cluster.models import Job, Node, Quota, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.models import Round
from scheduling.service.waiting import stated_estimate
from tests.api.conftest import JOBS_URL, job_body
from tests.service.test_rounds import FixedPolicy

pytestmark = pytest.mark.usefixtures("roomy_quotas", "reachable_nodes")


@pytest.fixture
def roomy_quotas(tenant_a: Tenant, tenant_c: Tenant) -> None:
    """Both tenants may use the whole cluster (no quota refusal in these tests)."""
    Quota.objects.update(guaranteed_gpus=8, borrow_limit=None)


@pytest.fixture
def reachable_nodes(settings: Any) -> None:
    """The rounds run a day ahead and no agent sends heartbeats: a node never heard from is
    trusted for one heartbeat timeout after its registration, so the timeout spans the test."""
    settings.SHAREWISE_HEARTBEAT_TIMEOUT_S = 10 * 86400.0


#: The rounds' clock: a whole second a day ahead, so every round comes after the submissions.
T0 = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)


def submit(api: APIClient, **fields: Any) -> dict[str, Any]:
    body = job_body(gpu_memory_mb=1000, iteration_time_s=2.0, **fields)
    response = api.post(JOBS_URL, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def round_at(capture: Callable, when: datetime | None, policy: Any = "sjf") -> Round | None:
    with capture(execute=True):
        return service.run_round(now=when, policy=policy)


@override_settings(SHAREWISE_ROUND_INTERVAL_S=10.0)
def test_a_pending_job_says_why_it_waits_and_when_it_may_start(
    alice_api: APIClient, charlie_api: APIClient, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    first = submit(alice_api, name="first", gpus=8, iterations=100)  # 100 x 2 s = 200 s on all 8 GPUs
    assert first["pending_reason"] == service.NOT_YET_CONSIDERED and first["estimated_start_at"] is None
    round_at(django_capture_on_commit_callbacks, T0)
    second = submit(alice_api, name="second", gpus=8, iterations=50)
    listed = alice_api.get(JOBS_URL).json()["results"]
    assert [j["pending_reason"] for j in listed] == [service.NOT_YET_CONSIDERED, None]  # newest first

    record = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1))
    assert record is not None
    reason = next(d["reason"] for d in record.decision_list() if d["job_id"] == second["id"])
    shown = alice_api.get(f"{JOBS_URL}{second['id']}/").json()
    assert shown["status"] == "pending"
    assert shown["pending_reason"] == reason  # the words the dashboard's queue shows
    # The first job holds all 8 GPUs until T0 + 200 s (100 iterations of 2 s from T0); rounds
    # every 10 s from T0 + 1 s: the second starts at the round of T0 + 201 s.
    assert datetime.fromisoformat(shown["estimated_start_at"]) == T0 + timedelta(seconds=201)
    running = alice_api.get(f"{JOBS_URL}{first['id']}/").json()
    assert running["status"] == "running"
    assert running["pending_reason"] is None and running["estimated_start_at"] is None
    assert alice_api.get(JOBS_URL, {"status": "pending"}).json()["results"][0]["pending_reason"] == reason
    assert charlie_api.get(f"{JOBS_URL}{second['id']}/").status_code == 404


@override_settings(SHAREWISE_ROUND_INTERVAL_S=10.0)
def test_a_repeated_round_refreshes_the_estimates(
    alice_api: APIClient, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    submit(alice_api, name="first", gpus=8, iterations=100)
    round_at(django_capture_on_commit_callbacks, T0)
    second = submit(alice_api, name="second", gpus=8, iterations=50)
    stored = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1))
    assert stored is not None and stored.pk is not None
    # Nothing changes at T0 + 5 s: the round is a repeat (not stored), its estimate replaces the
    # stored one. The progress known is still 0, so the end moves with the clock: T0 + 205 s.
    repeat = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=5))
    assert repeat is not None and repeat.pk is None
    assert Round.objects.count() == 2
    shown = alice_api.get(f"{JOBS_URL}{second['id']}/").json()
    assert datetime.fromisoformat(shown["estimated_start_at"]) == T0 + timedelta(seconds=205)


def test_an_estimate_beyond_the_year_9999_is_no_estimate(
    alice_api: APIClient, charlie_api: APIClient, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    # one of the longest jobs a tenant may submit (10^8 iterations of 86,400 s) holds all 8 GPUs:
    # the job behind it would start 8.64e12 s from now, about the year 275,800, which no datetime
    # holds; the listings of the tenant waiting behind it answered 500
    longest = job_body(
        name="longest", gpus=8, gpu_memory_mb=1000, iterations=10**8, iteration_time_s=86_400.0
    )
    assert alice_api.post(JOBS_URL, longest, format="json").status_code == 201
    round_at(django_capture_on_commit_callbacks, T0)
    behind = submit(charlie_api, name="behind", gpus=8, iterations=50)
    record = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1))
    assert record is not None
    assert record.estimated_starts[str(behind["id"])] > 253_402_300_800  # after 9999-12-31, UTC
    for response in (
        charlie_api.get(JOBS_URL),
        charlie_api.get(JOBS_URL, {"status": "pending"}),
        charlie_api.get(f"{JOBS_URL}{behind['id']}/"),
    ):
        assert response.status_code == 200, response.content[:200]
    shown = charlie_api.get(f"{JOBS_URL}{behind['id']}/").json()
    assert shown["pending_reason"] and shown["estimated_start_at"] is None


#: The edges of what an estimate may be (POSIX s) and what the API states for it: anything in the
#: year 9999, up to the last float before the year 10000, and the epoch are stated;
#: ``datetime.max``'s own timestamp (a float that is the first moment of the year 10000), anything
#: later, anything before the epoch and anything before the year 1 are no estimate, none a 500.
ESTIMATE_EDGES = [
    (253_402_300_799.0, datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
    (253_402_300_799.5, datetime(9999, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC)),
    (math.nextafter(253_402_300_800.0, 0.0), datetime(9999, 12, 31, 23, 59, 59, 999_969, tzinfo=UTC)),
    (datetime.max.replace(tzinfo=UTC).timestamp(), None),
    (253_402_300_800.0, None),
    (253_402_300_801.0, None),
    (0.0, datetime(1970, 1, 1, tzinfo=UTC)),
    (-0.5, None),
    (-1.0, None),
    (-62_135_596_801.0, None),  # a second before 0001-01-01T00:00:00Z
    (-1e18, None),
]


@pytest.mark.parametrize(("stored", "stated"), ESTIMATE_EDGES)
def test_an_estimate_at_the_edges_of_a_datetime(
    alice_api: APIClient,
    django_capture_on_commit_callbacks: Callable,
    stored: float,
    stated: datetime | None,
) -> None:
    submit(alice_api, name="first", gpus=8, iterations=100)
    round_at(django_capture_on_commit_callbacks, T0)
    second = submit(alice_api, name="second", gpus=8, iterations=50)
    record = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1))
    assert record is not None and str(second["id"]) in record.estimated_starts
    Round.objects.filter(pk=record.pk).update(estimated_starts={str(second["id"]): stored})
    for response in (alice_api.get(JOBS_URL), alice_api.get(f"{JOBS_URL}{second['id']}/")):
        assert response.status_code == 200, response.content[:200]
    shown = alice_api.get(f"{JOBS_URL}{second['id']}/").json()
    assert shown["pending_reason"]
    if stated is None:
        assert shown["estimated_start_at"] is None
    else:
        assert datetime.fromisoformat(shown["estimated_start_at"]) == stated


@pytest.mark.parametrize(
    "stored", [None, "1", True, math.nan, math.inf, -math.inf, 10**400, -(10**400), [1.0]]
)
def test_what_is_no_number_of_seconds_is_no_estimate(stored: Any) -> None:
    assert stated_estimate(stored) is None


def test_a_whole_number_of_seconds_is_an_estimate() -> None:
    assert stated_estimate(1_700_000_000) == 1_700_000_000.0


def test_preemptive_policies_give_no_estimate(
    alice_api: APIClient, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    submit(alice_api, name="first", gpus=8, iterations=100)
    round_at(django_capture_on_commit_callbacks, T0, policy="srtf")
    second = submit(alice_api, name="second", gpus=8, iterations=500)
    round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1), policy="srtf")
    shown = alice_api.get(f"{JOBS_URL}{second['id']}/").json()
    assert shown["pending_reason"] and shown["estimated_start_at"] is None


def test_another_tenants_jobs_are_unnamed_in_reasons(
    alice_api: APIClient, charlie_api: APIClient, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    # Strict FIFO: Alice's 8-GPU job cannot start while Charlie's first job runs, and Charlie's
    # second waits behind it: "waits behind job N (strict FIFO ...)".
    charlie_first = submit(charlie_api, name="c-first", gpus=1, iterations=100)
    round_at(django_capture_on_commit_callbacks, T0, policy="fifo")
    alice_job = submit(alice_api, name="wide", gpus=8, iterations=10)
    charlie_second = submit(charlie_api, name="c-second", gpus=1, iterations=10)
    record = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1), policy="fifo")
    assert record is not None
    raw = next(d["reason"] for d in record.decision_list() if d["job_id"] == charlie_second["id"])
    assert f"job {alice_job['id']}" in raw
    seen = charlie_api.get(f"{JOBS_URL}{charlie_second['id']}/").json()["pending_reason"]
    assert seen == raw.replace(f"job {alice_job['id']}", "another tenant's job")
    assert charlie_first["id"] != alice_job["id"]


def test_placements_name_the_job_sharing_each_gpu(
    cluster: list[Node],
    tenant_a: Tenant,
    tenant_c: Tenant,
    alice_api: APIClient,
    sent: list,
    django_capture_on_commit_callbacks: Callable,
) -> None:
    mine = Job.objects.create(
        tenant=tenant_a, name="mine", model="resnet50", batch_size=128, iterations=10, gpus=1
    )
    ours = Job.objects.create(
        tenant=tenant_a, name="ours", model="resnet50", batch_size=128, iterations=10, gpus=1
    )
    theirs = Job.objects.create(
        tenant=tenant_c, name="theirs", model="resnet50", batch_size=128, iterations=10, gpus=1
    )
    starts = (
        core.Start(mine.pk, (0,), 128, 1),
        core.Start(theirs.pk, (0,), 128, 1),  # shares GPU 0 (node-00:0) with "mine"
        core.Start(ours.pk, (1,), 128, 1),  # alone on node-00:1
    )
    round_at(django_capture_on_commit_callbacks, T0, policy=FixedPolicy(starts=starts))
    shown = alice_api.get(f"{JOBS_URL}{mine.pk}/").json()
    assert [(p["node"], p["gpu_index"], p["partner"]) for p in shown["placement"]] == [
        ("node-00", 0, "another tenant's job")
    ]
    alone = alice_api.get(f"{JOBS_URL}{ours.pk}/").json()
    assert alone["placement"][0]["partner"] is None
    listed = {j["id"]: j for j in alice_api.get(JOBS_URL).json()["results"]}
    assert listed[mine.pk]["placement"][0]["partner"] == "another tenant's job"


def test_events_are_the_jobs_history_for_its_tenant_only(
    alice_api: APIClient, charlie_api: APIClient, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    job = submit(alice_api, name="history", gpus=2, iterations=10)
    round_at(django_capture_on_commit_callbacks, None)  # now: before the cancel
    assert alice_api.post(f"{JOBS_URL}{job['id']}/cancel/").status_code == 200
    url = f"{JOBS_URL}{job['id']}/events/"
    body = alice_api.get(url).json()
    kinds = [e["kind"] for e in body["results"]]
    assert kinds == ["submitted", "placed", "cancelled"] and body["count"] == 3
    placed = body["results"][1]
    assert placed["data"]["gpus"] == ["node-00:0", "node-00:1"] and placed["data"]["sub_batch"] == 128
    assert body["results"][2]["message"] == "cancelled by alice"
    page = alice_api.get(url, {"limit": 1, "offset": 2}).json()
    assert [e["kind"] for e in page["results"]] == ["cancelled"]
    assert charlie_api.get(url).status_code == 404
    assert alice_api.get(f"{JOBS_URL}999999/events/").status_code == 404
