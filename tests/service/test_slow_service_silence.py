"""A heartbeat timeout that does not fire while the service is merely slow
(scheduling/service/silence.py, docs/AGENT.md §3): each agent waits for its report's answer before
its next one, so when the service answers in W s every node is read W s apart, staggered, while
the others' reads keep the newest heartbeat fresh. The agents send how long their previous report
took (``report_latency_s``) and the timeout counts on top of the fleet's lower median of it.

Timeout 15 s throughout. Without the allowance (the rule before), the staggered fleet below had
node-00 marked silent at 18 s (18 s behind node-03's heartbeat, read then) although it was healthy.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from agent.messages import MAX_REPORT_LATENCY_S
from cluster.models import Node, Placement, Tenant
from scheduling import service
from scheduling.service.silence import Hearing, fleet_allowance_s, fleet_hearing, is_silent, silent_for_s
from tests.faults.checks import Limits, ledger
from tests.service.test_agent_api import HEARTBEAT_URL, agent, place
from tests.service.test_agent_batch import BATCH_URL

TIMEOUT_S = 15.0
LATENCY_S = 20.0  # W: what every agent of the slow fleet measures
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
GPUS = [{"index": i, "uuid": "", "memory_mb": 16_000, "healthy": True} for i in range(4)]


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


# ------------------------------------------------------------------------------------ the rule


def test_the_allowance_is_the_lower_median_of_the_reported_latencies() -> None:
    # the median alone: a cap at the field's bound (3600 s) cuts nothing here
    cap = MAX_REPORT_LATENCY_S
    assert fleet_allowance_s([], cap) == 0.0
    assert fleet_allowance_s([20.0], cap) == 20.0
    # sorted 19, 20, 20, 21: the lower median is the second, 20 (3 of 4 reported ≥ 20)
    assert fleet_allowance_s([21.0, 20.0, 19.0, 20.0], cap) == 20.0
    # one slow node cannot raise it (a maximum would be 3600: an hour to detect a dead node)
    assert fleet_allowance_s([0.0, 0.0, 0.0, 3600.0], cap) == 0.0
    assert fleet_allowance_s([0.0, 3600.0], cap) == 0.0
    # a majority can: the service is slow for most nodes
    assert fleet_allowance_s([0.0, 20.0, 20.0, 3600.0], cap) == 20.0


def test_a_slow_fleet_by_hand() -> None:
    """Timeout 15 s, the fleet reports 20 s: 35 s of silence allowed, counted as before."""
    registered = at(-60)
    slow = Hearing(newest=at(20), allowance_s=LATENCY_S)
    # heard at 0, the others read up to 20: 20 s behind the newest, within 15 + 20 s
    assert silent_for_s(at(0), registered, slow.newest, at(20)) == pytest.approx(20.0)
    assert not is_silent(at(0), registered, slow, at(20), TIMEOUT_S)
    # the rule without the allowance marked it (20 > 15): the false mark of the slow service
    assert is_silent(at(0), registered, Hearing(newest=at(20)), at(20), TIMEOUT_S)
    # silent for timeout + allowance exactly: not yet; + ε: silent
    assert not is_silent(at(0), registered, Hearing(at(35), LATENCY_S), at(35), TIMEOUT_S)
    assert is_silent(at(0), registered, Hearing(at(35.1), LATENCY_S), at(35.1), TIMEOUT_S)
    # nothing read from anyone: the wall clock with a second timeout, 2 × (15 + 20) = 70 s
    assert not is_silent(at(0), registered, Hearing(at(0), LATENCY_S), at(70), TIMEOUT_S)
    assert is_silent(at(0), registered, Hearing(at(0), LATENCY_S), at(70.2), TIMEOUT_S)
    # never heard from, no node ever heard: the wall clock from registration, one timeout (+ 0)
    assert is_silent(None, registered, Hearing(None), at(-44.9), TIMEOUT_S)
    assert not is_silent(None, registered, Hearing(None), at(-45.1), TIMEOUT_S)


def test_the_hearing_is_one_query_of_the_ready_nodes_heard_from(
    fleet: dict, django_assert_num_queries: Callable
) -> None:
    nodes = {name: node for name, (node, _) in fleet.items()}
    nodes.update({n: Node.register(n, 4, 16_000, "v100")[0] for n in ("node-02", "node-03", "node-04")})
    rows = {  # name: (status, last heartbeat, reported latency)
        "node-00": (Node.Status.READY, at(10), 20.0),
        "node-01": (Node.Status.READY, at(12), 30.0),
        "node-02": (Node.Status.READY, at(5), 1.0),
        "node-03": (Node.Status.UNHEALTHY, at(40), 0.0),  # newest, but not ready: no latency
        "node-04": (Node.Status.READY, None, 0.0),  # never heard from: no latency
    }
    for name, (status, heard, latency) in rows.items():
        Node.objects.filter(name=name).update(status=status, last_heartbeat=heard, report_latency_s=latency)
    with django_assert_num_queries(1):
        hearing = fleet_hearing()
    # latencies of node-00, 01, 02: sorted 1, 20, 30, lower median 20
    assert hearing == Hearing(newest=at(40), allowance_s=20.0)


# ------------------------------------------------------------------------------ a staggered fleet


def four_nodes(fleet: dict) -> dict[str, Node]:
    nodes = {name: node for name, (node, _) in fleet.items()}
    nodes.update({n: Node.register(n, 4, 16_000, "v100")[0] for n in ("node-02", "node-03")})
    return nodes


def replay(nodes: dict[str, Node], stops: dict[str, float], until: float) -> list[tuple[float, dict]]:
    """Node k is read at 6k + 20m s (m = 0, 1, …: a report every W = 20 s, staggered), each
    heartbeat saying 20 s of latency, until ``stops[name]`` for a node whose agent dies then; the
    heartbeat check runs every 0.5 s of the service's clock. Returns the checks that marked a
    node, as ``(time, marked)``."""
    reads = sorted(
        (6.0 * k + 20.0 * m, name)
        for k, name in enumerate(sorted(nodes))
        for m in range(int(until // 20) + 1)
        if 6.0 * k + 20.0 * m <= min(until, stops.get(name, until))
    )
    marks = []
    for tick in range(int(until * 2) + 1):
        now = tick / 2
        while reads and reads[0][0] <= now:
            t, name = reads.pop(0)
            service.record_heartbeat(nodes[name], GPUS, [], now=at(t), report_latency_s=LATENCY_S)
        marked = service.check_heartbeats(at(now))
        if marked:
            marks.append((now, marked))
    return marks


@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S)
def test_a_slow_service_reading_each_node_20_s_apart_marks_no_node(fleet: dict, sent: list) -> None:
    nodes = four_nodes(fleet)
    assert replay(nodes, {}, until=120.0) == []
    assert set(Node.objects.values_list("status", flat=True)) == {Node.Status.READY}
    assert set(Node.objects.values_list("report_latency_s", flat=True)) == {LATENCY_S}


@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S)
def test_a_dead_agent_in_a_slow_fleet_is_marked_within_timeout_plus_allowance(
    fleet: dict, sent: list
) -> None:
    """node-00 is last read at 40 s; the others go on. It is marked once a heartbeat read from
    another node is more than 15 + 20 = 35 s newer than its last: node-03's at 78 s (node-02's at
    72 s is 32 s newer), within the bound of AGENT.md §3 (35 s of the others' heartbeats, then the
    next one read: 6 s later at most here); the wall-clock rule alone would wait to 40 + 70 s."""
    nodes = four_nodes(fleet)
    assert replay(nodes, {"node-00": 40.0}, until=120.0) == [(78.0, {"node-00": []})]
    assert Node.objects.get(name="node-00").status == Node.Status.UNHEALTHY
    assert Node.objects.filter(status=Node.Status.READY).count() == 3


# ------------------------------------------------------------------------------- what is sent


@pytest.mark.parametrize(
    "latency",
    [-0.1, "20", True, None, 3600.5, [1.0]],
    ids=["negative", "string", "bool", "null", "too-large", "list"],
)
def test_a_bad_report_latency_is_400_naming_it(
    fleet: dict, django_capture_on_commit_callbacks: Callable, latency: Any
) -> None:
    node, token = fleet["node-00"]
    beat = {"gpus": GPUS, "running": [], "report_latency_s": latency}
    with django_capture_on_commit_callbacks(execute=True):
        single = agent(token).post(HEARTBEAT_URL, {"node": "node-00", **beat}, format="json")
        batch = agent(token).post(BATCH_URL, {"node": "node-00", "heartbeat": beat}, format="json")
    assert single.status_code == 400 and set(single.json()["fields"]) == {"report_latency_s"}
    assert batch.status_code == 400 and set(batch.json()["fields"]) == {"heartbeat"}
    assert "report_latency_s" in batch.json()["error"]
    node.refresh_from_db()
    assert node.last_heartbeat is None  # nothing of either was applied


def test_the_reported_latency_is_stored_and_an_older_agents_counts_as_0(
    fleet: dict, django_capture_on_commit_callbacks: Callable
) -> None:
    node, token = fleet["node-00"]
    with django_capture_on_commit_callbacks(execute=True):
        beat = {"gpus": GPUS, "running": []}
        assert (
            agent(token)
            .post(HEARTBEAT_URL, {"node": "node-00", **beat, "report_latency_s": 3600}, format="json")
            .status_code
            == 200
        )
        node.refresh_from_db()
        assert node.report_latency_s == 3600.0  # the bound itself is accepted
        body = {"node": "node-00", "heartbeat": {**beat, "report_latency_s": 20.5}}
        assert agent(token).post(BATCH_URL, body, format="json").status_code == 200
        node.refresh_from_db()
        assert node.report_latency_s == 20.5
        assert agent(token).post(HEARTBEAT_URL, {"node": "node-00", **beat}, format="json").status_code == 200
    node.refresh_from_db()
    assert node.report_latency_s == 0.0


@pytest.mark.parametrize(("latency", "broken"), [(20.0, False), (0.0, True)])
def test_the_fault_campaigns_ledger_counts_the_timeout_on_top_of_the_fleets_latency(
    fleet: dict,
    tenant: Tenant,
    sent: list,
    django_capture_on_commit_callbacks: Callable,
    latency: float,
    broken: bool,
) -> None:
    """Invariant 6 judges silence as the service does: node-00, 30 s behind node-01 and placed
    on a minute ago, breaks it past 15 + 4 s (the start-report delay) of a fast fleet, not within
    15 + 20 + 4 s of a fleet that reports 20 s of latency."""
    job = place(tenant, django_capture_on_commit_callbacks)  # on node-00
    now = timezone.now()
    Placement.objects.filter(job=job).update(created_at=now - timedelta(seconds=60))
    Node.objects.update(report_latency_s=latency, last_heartbeat=now)
    Node.objects.filter(name="node-00").update(last_heartbeat=now - timedelta(seconds=30))
    silent = [b for b in ledger(now, Limits(TIMEOUT_S, 600.0)) if "still placed" in b]
    assert bool(silent) is broken
