"""A round writes what changed and nothing else (issue 16, item 3): a round that starts and
preempts nothing and decides what the last recorded round decided writes no row (the round
lease's own UPDATEs aside), and what it leaves the API and the dashboard to read is unchanged.

The cluster fixture: node-00 and node-01, four 16,000 MB V100s each (8 GPUs). Jobs declare their
memory and iteration time, so their estimated starts follow from the running job's remaining time
(scheduling.core.eta).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from cluster.models import Job, JobEvent, Placement, Quota, Tenant
from scheduling import service
from scheduling.models import Round
from tests.api.conftest import JOBS_URL, job_body

pytestmark = pytest.mark.usefixtures("roomy_quotas", "reachable_nodes")

#: The rounds' clock: a whole second a day ahead, so every round comes after the submissions.
T0 = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
WRITES = ("INSERT", "UPDATE", "DELETE")


@pytest.fixture
def roomy_quotas(tenant_a: Tenant, tenant_c: Tenant) -> None:
    """Both tenants may use the whole cluster (no quota refusal in these tests)."""
    Quota.objects.update(guaranteed_gpus=8, borrow_limit=None)


@pytest.fixture
def reachable_nodes(settings: Any) -> None:
    """No agent sends heartbeats: the timeout spans the test (nodes never heard from are trusted
    for one timeout after their registration)."""
    settings.SHAREWISE_HEARTBEAT_TIMEOUT_S = 10 * 86400.0


def submit(api: APIClient, **fields: Any) -> dict[str, Any]:
    response = api.post(JOBS_URL, job_body(gpu_memory_mb=1000, iteration_time_s=2.0, **fields), format="json")
    assert response.status_code == 201, response.content
    return response.json()


def round_at(capture: Callable, when: datetime) -> tuple[Round | None, list[str]]:
    """A round at ``when`` (policy SJF, which estimates starts) and the SQL of the rows it wrote,
    the round lease's own UPDATEs left out (every round takes and frees the lease)."""
    with CaptureQueriesContext(connection) as queries, capture(execute=True):
        record = service.run_round(now=when, policy="sjf")
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(WRITES) and "schedulerlease" not in q["sql"].lower()
    ]
    return record, writes


def shown(api: APIClient, ids: list[int]) -> list[tuple[str, str | None, str | None]]:
    """``(status, pending reason, estimated start)`` of each job as the API shows it."""
    out = []
    for pk in ids:
        body = api.get(f"{JOBS_URL}{pk}/").json()
        out.append((body["status"], body["pending_reason"], body["estimated_start_at"]))
    return out


def test_a_round_that_changes_nothing_writes_no_row(
    alice_api: APIClient, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """A short job of 8 GPUs holds the cluster (SJF starts it first); three longer ones wait.
    After a round that records their waits, the same round again (same clock, same state) writes
    nothing: no job, placement, event or round row, not even the estimates it already stored.
    Fails on the old code, which wrote the unchanged estimates on the latest round at every
    repeat."""
    big = submit(alice_api, name="big", gpus=8, iterations=10)  # 10 x 2 s = 20 s on all 8 GPUs
    waiting = [submit(alice_api, name=f"w{i}", gpus=g, iterations=500)["id"] for i, g in enumerate((4, 2, 8))]
    first, writes = round_at(django_capture_on_commit_callbacks, T0)
    assert first is not None and first.n_started == 1 and writes  # the start is written
    second, writes = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1))
    assert second is not None and second.pk is not None and second.n_started == 0
    before = shown(alice_api, [big["id"], *waiting])
    dispatched = len(sent)
    counts = (Job.objects.count(), Placement.objects.count(), JobEvent.objects.count(), Round.objects.count())

    third, writes = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1))
    assert third is not None and third.pk is None  # a repeat: not recorded again
    assert writes == []
    assert len(sent) == dispatched  # no message either
    assert shown(alice_api, [big["id"], *waiting]) == before
    assert (
        Job.objects.count(),
        Placement.objects.count(),
        JobEvent.objects.count(),
        Round.objects.count(),
    ) == counts
    # The first waiting job (4 GPUs) starts when the big one ends, T0 + 20 s, at the next round
    # of the 10 s grid that started at T0 + 1 s: T0 + 21 s (scheduling.core.eta).
    assert before[0] == ("running", None, None)
    assert all(status == "pending" and reason for status, reason, _ in before[1:])
    assert before[1][0] == "pending" and datetime.fromisoformat(before[1][2]) == T0 + timedelta(seconds=21)


def test_a_round_whose_estimates_moved_writes_only_them(
    alice_api: APIClient, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """The same decisions 4 s later: the estimated starts follow the clock (a start is on the
    round grid of the new round), so the latest round's estimates are rewritten — one UPDATE of
    the round row, nothing else."""
    submit(alice_api, name="big", gpus=8, iterations=10)  # 20 s on all 8 GPUs
    waiting = submit(alice_api, name="w", gpus=4, iterations=500)["id"]
    round_at(django_capture_on_commit_callbacks, T0)
    second, _ = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=1))
    assert second is not None and second.pk is not None
    later, writes = round_at(django_capture_on_commit_callbacks, T0 + timedelta(seconds=5))
    assert later is not None and later.pk is None
    assert len(writes) == 1 and writes[0].upper().startswith("UPDATE") and "scheduling_round" in writes[0]
    # rounds every 10 s from T0 + 5 s: the first after the big job's end (T0 + 20 s) is T0 + 25 s
    estimate = alice_api.get(f"{JOBS_URL}{waiting}/").json()["estimated_start_at"]
    assert datetime.fromisoformat(estimate) == T0 + timedelta(seconds=25)
