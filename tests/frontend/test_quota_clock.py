"""The quota panel in the demo's trace time (docs/DASHBOARD.md, "Trace time in the demo"): its
windows are trace seconds that never reach back before the replay began, its GPU-hours are wall
GPU-hours × speed-up; outside a replay its body is byte for byte what it was before trace time
reached it (``data/quota_wall_<database>_<viewer>.json``, written by the earlier code at the same frozen now)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.db import connection
from django.test import Client

from cluster.models import Job, Node, Placement
from demo.database import record_trace_clock
from tests.frontend.conftest import gpu, make_job, place, session_client

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SPEEDUP = 50.0
#: The replay began 1,000 wall s before NOW: 50,000 s of trace time (13.9 h) ago.
ORIGIN = NOW - timedelta(seconds=1000)
DATA = Path(__file__).parent / "data"


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


@pytest.fixture
def jobs(cluster: list[Node], tenant_a: Any, tenant_c: Any) -> None:
    """team-a (4 guaranteed GPUs): a job alone on node-00:0 since 500 wall s before NOW (submitted
    600 s before), and one that ran 1,500 → 1,200 s before NOW, before the replay began; team-c
    (2 guaranteed): a job submitted 100 s before NOW, alone on node-00:1 for the last 36 s."""
    early = make_job(tenant_a, "a-early", status=Job.Status.SUCCEEDED, submitted_at=ago(1600))
    place(early, gpu("node-00", 2), since=ago(1500))
    Placement.objects.filter(job=early).update(active=False, ended_at=ago(1200))
    Job.objects.filter(pk=early.pk).update(status=Job.Status.SUCCEEDED, finished_at=ago(1200))
    place(make_job(tenant_a, "a-long", submitted_at=ago(600)), gpu("node-00", 0), since=ago(500))
    place(make_job(tenant_c, "c-late", submitted_at=ago(100)), gpu("node-00", 1), since=ago(36))


def quota_body(client: Client) -> bytes:
    with mock.patch("django.utils.timezone.now", return_value=NOW):
        response = client.get("/dashboard/api/quota.json")
    assert response.status_code == 200, response.content
    return bytes(response.content)


def rows_of(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    spec = body["tables"][name]
    return [dict(zip(spec["columns"], row, strict=True)) for row in spec["rows"]]


@pytest.mark.parametrize("who", ["admin", "alice"])
def test_outside_a_replay_the_body_is_what_it_was(jobs: None, alice: Any, who: str) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("q-admin", is_staff=True) if who == "admin" else alice
    got = quota_body(session_client(user))
    # per database: their epoch seconds differ in the last bits (SQLite computes them from a Julian day)
    golden = DATA / f"quota_wall_{connection.vendor}_{who}.json"
    if not golden.exists():  # written once, by the code before trace time reached the panel
        golden.write_bytes(got)
    assert got == golden.read_bytes()
