"""The silence allowance is capped (``SHAREWISE_SILENCE_ALLOWANCE_MAX_S``, default 60 s;
scheduling/service/silence.py, docs/AGENT.md §3): a fleet that reports an hour's latency no
longer hides a dead node for an hour. Uncapped, the allowance was the fleet's lower median up to
the field's bound (3600 s), and a dead agent among live ones was marked only after 15 + 3600 s.

Timeout 15 s, cap 60 s throughout unless a test says otherwise: a node is silent past 75 s of
the others' heartbeats, 150 s of wall clock when no node is read at all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from cluster.models import Node
from scheduling import service
from scheduling.service.silence import Hearing, allowance_cap_s, fleet_allowance_s, fleet_hearing, is_silent
from tests.api.test_exposure import import_settings

TIMEOUT_S = 15.0
CAP_S = 60.0
HOUR_S = 3600.0  # what the slow fleet reports: the field's bound
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
GPUS = [{"index": i, "uuid": "", "memory_mb": 16_000, "healthy": True} for i in range(4)]


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def test_the_default_cap_is_60_s() -> None:
    assert allowance_cap_s() == 60.0


def test_the_cap_bounds_the_lower_median_and_nothing_below_it() -> None:
    assert fleet_allowance_s([HOUR_S, HOUR_S, HOUR_S], CAP_S) == 60.0  # median 3600 → 60
    assert fleet_allowance_s([0.0, 90.0, 90.0], CAP_S) == 60.0  # median 90 → 60
    assert fleet_allowance_s([0.0, 20.0, 20.0, HOUR_S], CAP_S) == 20.0  # median 20, below it
    assert fleet_allowance_s([60.0, 60.0], CAP_S) == 60.0  # at the cap exactly
    assert fleet_allowance_s([HOUR_S], 0.0) == 0.0  # 0: no allowance at all
    assert fleet_allowance_s([], CAP_S) == 0.0


def test_a_dead_node_behind_an_hours_latency_by_hand() -> None:
    """The fleet reports 3600 s; the allowance is min(3600, 60) = 60 s."""
    registered = at(-600)
    allowance = fleet_allowance_s([HOUR_S] * 3, CAP_S)

    def silent(newest: float, now: float, allowance_s: float = allowance) -> bool:
        return is_silent(at(0), registered, Hearing(at(newest), allowance_s), at(now), TIMEOUT_S)

    # heard at 0, the others read up to 75 s: 75 = 15 + 60, not yet; 75.1 > 75: silent
    assert not silent(75.0, 75.0)
    assert silent(75.1, 75.1)
    # uncapped (the rule before): 3614 s of the others' heartbeats and still not silent
    assert not silent(3614.0, 3614.0, allowance_s=HOUR_S)
    # the whole fleet silent (newest = its own 0 s): wall clock / 2 against 75 s, i.e. 150 s
    assert not silent(0.0, 150.0)
    assert silent(0.0, 150.2)
    # cap 0: the strict rule, silent past the timeout alone
    strict = fleet_allowance_s([HOUR_S] * 3, 0.0)
    assert not silent(15.0, 15.0, strict) and silent(15.1, 15.1, strict)


@override_settings(SHAREWISE_SILENCE_ALLOWANCE_MAX_S=CAP_S)
def test_the_hearing_carries_the_capped_allowance(fleet: dict) -> None:
    Node.objects.update(status=Node.Status.READY, last_heartbeat=at(10), report_latency_s=HOUR_S)
    assert fleet_hearing() == Hearing(newest=at(10), allowance_s=60.0)
    with override_settings(SHAREWISE_SILENCE_ALLOWANCE_MAX_S=25.0):
        assert fleet_hearing() == Hearing(newest=at(10), allowance_s=25.0)


@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S, SHAREWISE_SILENCE_ALLOWANCE_MAX_S=CAP_S)
def test_a_dead_agent_in_a_fleet_reporting_an_hour_is_marked_past_timeout_plus_cap(
    fleet: dict, sent: list
) -> None:
    """Three nodes each report 3600 s of latency every 5 s; node-00's last heartbeat is at 0 s,
    the others go on (node-01 at 0, 5, 10, …; node-02 too), and a check follows each 5 s of
    heartbeats. node-00 is marked at the first check whose newest heartbeat is more than 75 s
    after 0: the one at 80 s (at 75 s its silence is 75, not more). Uncapped it stayed ready until
    3615 s."""
    nodes = {name: node for name, (node, _) in fleet.items()}
    nodes["node-02"] = Node.register("node-02", 4, 16_000, "v100")[0]
    marks = []
    for step in range(0, 21):  # t = 0, 5, …, 100 s
        t = 5.0 * step
        for name, node in nodes.items():
            if name != "node-00" or t == 0.0:
                service.record_heartbeat(node, GPUS, [], now=at(t), report_latency_s=HOUR_S)
        marked = service.check_heartbeats(at(t))
        if marked:
            marks.append((t, marked))
    assert marks == [(80.0, {"node-00": []})]
    assert set(Node.objects.filter(status=Node.Status.READY).values_list("name", flat=True)) == {
        "node-01",
        "node-02",
    }


@pytest.mark.parametrize("value", ["-1", "nan", "3601", "a minute"])
def test_a_bad_cap_stops_the_settings_naming_it(value: str) -> None:
    refused = import_settings(SHAREWISE_SILENCE_ALLOWANCE_MAX_S=value)
    assert refused.returncode != 0
    assert "SHAREWISE_SILENCE_ALLOWANCE_MAX_S must be a number of seconds from 0 to 3600" in refused.stderr
    assert repr(value) in refused.stderr


def test_a_cap_of_0_or_3600_is_accepted() -> None:
    assert import_settings(SHAREWISE_SILENCE_ALLOWANCE_MAX_S="0").returncode == 0
    assert import_settings(SHAREWISE_SILENCE_ALLOWANCE_MAX_S="3600").returncode == 0
