"""The quota panel in the demo's trace time (docs/DASHBOARD.md, "Trace time in the demo"): its
windows are trace seconds that never reach back before the replay began, its GPU-hours are wall
GPU-hours × speed-up; outside a replay they are wall time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest
from django.test import Client

from cluster.models import Job, Node, Placement
from demo.database import record_trace_clock
from scheduling.service import closed_runs
from scheduling.service.closed_charge import GRID_S, KEPT_ENTRIES, keep, window_charge
from tests.frontend.conftest import gpu, make_job, place

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SPEEDUP = 50.0
#: The replay began 1,000 wall s before NOW: 50,000 s of trace time (13.9 h) ago.
ORIGIN = NOW - timedelta(seconds=1000)


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


def quota_body(client: Client, at: datetime = NOW) -> bytes:
    with mock.patch("django.utils.timezone.now", return_value=at):
        response = client.get("/dashboard/api/quota.json")
    assert response.status_code == 200, response.content
    return bytes(response.content)


def rows_of(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    spec = body["tables"][name]
    return [dict(zip(spec["columns"], row, strict=True)) for row in spec["rows"]]


def test_outside_a_replay_windows_and_gpu_hours_are_wall_time(jobs: None, admin_web: Client) -> None:
    body = json.loads(quota_body(admin_web))
    rows = {r["tenant"]: r for r in rows_of(body, "quota_windows")}
    a, c = rows["team-a"], rows["team-c"]
    # the last 2 h of wall time: team-a's a-long 500 GPU-s and a-early 300 (1,500 → 1,200 s ago)
    # = 800 GPU-s = 0.222 GPU-h of 4 GPUs × 2 h = 8; team-c 36 GPU-s = 0.01 of 2 × 2 h = 4
    assert (a["GPU-hours (last 2 h)"], a["guaranteed GPU-hours (last 2 h)"]) == (0.222, 8.0)
    assert (c["GPU-hours (last 2 h)"], c["guaranteed GPU-hours (last 2 h)"]) == (0.01, 4.0)
    # 24 h: the same runs (nothing older), 4 × 24 = 96 and 2 × 24 = 48 guaranteed
    assert (a["GPU-hours (last 24 h)"], a["guaranteed GPU-hours (last 24 h)"]) == (0.222, 96.0)
    assert "trace time" not in json.dumps(body)


@pytest.fixture
def replay(jobs: None) -> None:
    """The replay at 50x whose trace time 0 s is ``ORIGIN`` (1,000 wall s before NOW)."""
    record_trace_clock(SPEEDUP, 0.0, ORIGIN.timestamp(), "hand-built")


def test_in_a_replay_windows_and_gpu_hours_are_trace_time(replay: None, admin_web: Client) -> None:
    body = json.loads(quota_body(admin_web))
    rows = {r["tenant"]: r for r in rows_of(body, "quota_windows")}
    two, day = "last 2 h of trace time", "last 24 h of trace time"
    a, c = rows["team-a"], rows["team-c"]
    # 2 h of trace time = 7,200 / 50 = 144 wall s. team-a alone on a GPU all of it: 144 GPU-s × 50
    # = 7,200 trace GPU-s = 2 GPU-h of 4 GPUs × 2 h = 8; team-c for 36 wall s: 1,800 = 0.5 GPU-h of 4
    assert (a[f"GPU-hours ({two})"], a[f"guaranteed GPU-hours ({two})"]) == (2.0, 8.0)
    assert (c[f"GPU-hours ({two})"], c[f"guaranteed GPU-hours ({two})"]) == (0.5, 4.0)
    assert (a[f"share of guarantee ({two})"], c[f"share of guarantee ({two})"]) == (0.25, 0.125)
    # 24 h of trace time = 1,728 wall s, more than the replay's 1,000: it begins at the replay's
    # start (a-early, before it, is not counted): team-a 500 wall s × 50 = 6.944 GPU-h of
    # 4 GPUs × 50,000 trace s = 55.556; team-c 0.5 of 2 × 50,000 s = 27.778
    assert (a[f"GPU-hours ({day})"], a[f"guaranteed GPU-hours ({day})"]) == (6.944, 55.556)
    assert (c[f"GPU-hours ({day})"], c[f"guaranteed GPU-hours ({day})"]) == (0.5, 27.778)
    assert (a[f"share of guarantee ({day})"], c[f"share of guarantee ({day})"]) == (0.125, 0.018)
    fair = {r["window"]: r for r in rows_of(body, "window_fairness")}
    # both had work for at least half of the 144 wall s (team-a 600 s, team-c 100 s):
    # x = 2 / 4 = 0.5 and 0.5 / 2 = 0.25, Jain (0.75)² / (2 × (0.25 + 0.0625)) = 0.9, max/min 2
    assert (fair[two]["Jain's index"], fair[two]["max/min"]) == (0.9, 2.0)
    assert fair[two]["tenants compared"] == "team-a, team-c"
    # half of the 1,000 wall s since the replay began: team-a (600 s) only
    assert (fair[day]["Jain's index"], fair[day]["tenants compared"]) == (1.0, "team-a")
    assert body["summary"] == (
        f"No tenant is over quota. Windowed Jain's index of GPU-hours ÷ guarantee: {two} 0.9; {day} 1.0."
    )
    assert "trace time" in body["tables"]["quota_windows"]["note"]
    assert [d["name"] for d in body["figures"]["window_share"]["data"]] == [two, day]


def test_a_member_sees_its_own_tenant_in_trace_time(replay: None, alice_web: Client) -> None:
    body = json.loads(quota_body(alice_web))
    (row,) = rows_of(body, "quota_windows")
    assert (row["tenant"], row["GPU-hours (last 2 h of trace time)"]) == ("team-a", 2.0)
    fair = {r["window"]: r for r in rows_of(body, "window_fairness")}
    assert fair["last 2 h of trace time"]["tenants compared"] == 2
    assert "team-c" not in json.dumps(body)


def test_a_window_from_the_replays_start_keeps_its_entry_as_now_moves_on(
    replay: None, admin_web: Client
) -> None:
    # the last 24 h of trace time begin at the replay's start: 1,000 wall s before NOW, 1,005
    # before NOW + 5 s — one step of the cutoff (17 × 60 s), one kept entry, not rebuilt
    quota_body(admin_web)
    first = closed_runs.kept(1000)
    later = json.loads(quota_body(admin_web, NOW + timedelta(seconds=5)))
    assert first is not None and closed_runs.kept(1005) is first
    # and the 2 h of trace time are still 144 wall s ending at the later now
    assert rows_of(later, "quota_windows")[0]["GPU-hours (last 2 h of trace time)"] == 2.0


def test_each_process_keeps_a_few_entries(cluster: list[Node]) -> None:
    hi = NOW.timestamp()
    lengths = [GRID_S * k for k in range(1, KEPT_ENTRIES + 3)]
    for length in lengths:
        closed_runs.job_spans(hi - length, hi)
        window_charge(hi - length, hi)
    assert [closed_runs.kept(s) is not None for s in lengths] == [False, False] + [True] * KEPT_ENTRIES
    local: dict[int, str] = {}
    for k in range(KEPT_ENTRIES + 2):
        keep(local, k, str(k))
    assert local == {k: str(k) for k in range(2, KEPT_ENTRIES + 2)}  # the oldest two dropped
