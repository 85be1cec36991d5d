"""The decisions endpoint reads the round summaries once a poll: the rounds it shows are the
newest of the rows it counts (``latest_rounds(n, summaries)``), the same rounds as read again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from frontend.payloads.rounds import latest_rounds, round_summaries
from scheduling.models import Round

pytestmark = pytest.mark.django_db


def rounds(n: int) -> None:
    now = timezone.now()
    for k in range(n):
        Round.objects.create(
            policy="sjf-bsbf",
            duration_ms=1.0,
            n_started=0,
            n_waiting=0,
            n_preempted=0,
            decisions=[],
            started_at=now - timedelta(seconds=60 * (n - k)),
            finished_at=now,
        )


def test_the_shown_rounds_are_the_newest_of_the_counted_ones() -> None:
    rounds(5)
    counted = round_summaries(30)
    assert len(counted) == 5
    given = [r.pk for r in latest_rounds(3, counted)]
    assert given == [r.pk for r in latest_rounds(3)] == [row[0] for row in counted[:3]]
    assert given == sorted(given, reverse=True)  # newest first (started in id order here)
    assert [r.pk for r in latest_rounds(9, counted)] == [row[0] for row in counted]


def test_a_decisions_poll_reads_the_summaries_once(admin_web: Client) -> None:
    rounds(3)
    client = admin_web
    client.get("/dashboard/api/decisions.json?rounds=2")
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/dashboard/api/decisions.json?rounds=2").status_code == 200
    summaries = [q["sql"] for q in queries.captured_queries if '"scheduling_round"."n_preempted"' in q["sql"]]
    assert len(summaries) == 1
