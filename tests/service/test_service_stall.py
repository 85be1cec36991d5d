"""A heartbeat timeout that does not fire while the service itself is behind
(scheduling/service/silence.py): silence is judged against the newest heartbeat the service has
read from any node, so a service that read nothing for a while blames no node, while a node whose
agent died among live ones is still detected within the timeout.

Fleet: node-00 and node-01 (tests/service/conftest.py); timeout 15 s. With the wall-clock rule
that came before, the stalled case marked both nodes unhealthy and requeued node-00's job.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from cluster.models import Job, Node, Tenant
from scheduling import service
from scheduling.service.silence import silent_for_s
from tests.service.test_agent_api import place

TIMEOUT_S = 15.0
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def heard(name: str, s: float) -> None:
    """The service read a heartbeat of ``name`` at T0 + ``s`` seconds."""
    Node.objects.filter(name=name).update(last_heartbeat=at(s))


def test_silence_by_hand() -> None:
    """Hand-worked values: node heard at 0, registered at −60."""
    registered = at(-60)
    # the others read up to 30 s: 30 s of silence (wall 40 s / 2 = 20 s is shorter)
    assert silent_for_s(at(0), registered, at(30), at(40)) == pytest.approx(30.0)
    # nothing read since 0 (the service was stalled): the wall clock with a second timeout, 40 / 2
    assert silent_for_s(at(0), registered, at(0), at(40)) == pytest.approx(20.0)
    # the node itself is the newest: the same
    assert silent_for_s(at(0), registered, at(0), at(10)) == pytest.approx(5.0)
    # never heard from: from its registration; no node ever heard: the wall clock, 60 s
    assert silent_for_s(None, registered, None, at(0)) == pytest.approx(60.0)
    # a newest heartbeat after the check's time counts up to the check only
    assert silent_for_s(at(0), registered, at(100), at(20)) == pytest.approx(20.0)


@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S)
def test_a_node_whose_heartbeats_stopped_is_marked_unhealthy(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)  # on node-00
    heard("node-00", 0)
    heard("node-01", 14)  # node-01's agent goes on; node-00's died after 0
    with capture(execute=True):
        assert service.check_heartbeats(at(14)) == {}  # silent 14 s ≤ 15 s
    heard("node-01", 16)
    with capture(execute=True):
        assert service.check_heartbeats(at(16)) == {"node-00": [job.pk]}  # 16 s > 15 s
    job.refresh_from_db()
    assert Node.objects.get(name="node-00").status == Node.Status.UNHEALTHY
    assert Node.objects.get(name="node-01").status == Node.Status.READY
    assert job.status == Job.Status.PENDING
    # the round after it sees node-00's GPUs as unusable, node-01's as usable
    gpus = service.load_state(at(16)).snapshot.cluster.gpus
    assert {g.node for g in gpus if g.healthy} == {"node-01"}


@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S)
def test_a_node_delayed_only_because_the_service_was_stalled_is_not_marked(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """Both agents heartbeat every second, but the service read nothing between 0 and 25 s (a
    round held the database, its threads were queued): the check at 25 s blames no one, and the
    rounds keep both nodes' GPUs."""
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    heard("node-00", 0)
    heard("node-01", 0.5)
    with capture(execute=True):
        assert service.check_heartbeats(at(25)) == {}
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING
    assert Node.objects.filter(status=Node.Status.READY).count() == 2
    assert all(g.healthy for g in service.load_state(at(25)).snapshot.cluster.gpus)
    # the service catches up: node-01's queued heartbeats are read, node-00's are not (it did die
    # meanwhile): node-00 is judged against what was read, 26 − 0 > 15 s
    heard("node-01", 26)
    with capture(execute=True):
        assert service.check_heartbeats(at(26)) == {"node-00": [job.pk]}


@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S)
def test_a_whole_fleet_silent_at_once_is_marked_after_two_timeouts(
    fleet: dict, tenant: Tenant, sent: list, django_capture_on_commit_callbacks: Callable
) -> None:
    """No heartbeat read from anyone: the fleet died or the service read nothing; after two
    timeouts of wall clock (30 s) the nodes are marked all the same."""
    capture = django_capture_on_commit_callbacks
    job = place(tenant, capture)
    heard("node-00", 0)
    heard("node-01", 0)
    with capture(execute=True):
        assert service.check_heartbeats(at(29)) == {}
    with capture(execute=True):
        assert service.check_heartbeats(at(31)) == {"node-00": [job.pk], "node-01": []}


@override_settings(SHAREWISE_HEARTBEAT_TIMEOUT_S=TIMEOUT_S)
def test_a_heartbeat_read_while_the_check_runs_keeps_the_node(
    fleet: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check decides from what it read first; a heartbeat recorded between that decision and
    the update (last_heartbeat moved) is not overruled."""
    from scheduling.service import heartbeats

    heard("node-00", 0)
    heard("node-01", 20)
    original = heartbeats.is_silent

    def silent_then_heard(*args: Any) -> bool:
        result = original(*args)
        heard("node-00", 20)  # a heartbeat lands between the decision and the update
        return result

    monkeypatch.setattr(heartbeats, "is_silent", silent_then_heard)
    assert service.check_heartbeats(at(20)) == {}
    assert Node.objects.get(name="node-00").status == Node.Status.READY
