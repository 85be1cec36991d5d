"""The decisions endpoint's rows kept per round and viewer (``frontend.payloads.decisions``) give
the JSON built from scratch, byte for byte, for an admin and two members, after random changes
(a round recorded with starts, shares, preemptions and waits whose reasons cite jobs; a job
renamed, moved to the other tenant or deleted; a job finished), and a kept round's rows are
not built again while nothing they show changed."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest

from cluster.models import Job, Tenant
from frontend.payloads import decisions, memo
from frontend.payloads.common import Viewer
from scheduling.models import Round
from scheduling.round_waits import pack_waits
from tests.frontend.conftest import make_job

# moments no other test's round has (rounds are parsed once per process, by id and start)
NOW = datetime(2026, 5, 7, 9, 0, 0, 250000, tzinfo=UTC)


def assert_same(viewers: list[Viewer], at: datetime, n_rounds: int) -> None:
    """The body with the kept rows equals the one built with none kept, for every viewer."""
    with mock.patch("django.utils.timezone.now", return_value=at):
        kept = [_json(decisions.decisions_payload(v, n_rounds)) for v in viewers]
        memo.forget()
        decisions.forget()
        afresh = [_json(decisions.decisions_payload(v, n_rounds)) for v in viewers]
        memo.forget()  # the next poll's body is built from the rows kept before this check
    assert kept == afresh


def _json(body: Any) -> bytes:
    """A body's JSON (a kept body, or a plain one: no round yet)."""
    return body.json() if hasattr(body, "json") else memo.dumps(body)


def _round(rng: random.Random, at: datetime, jobs: list[int]) -> None:
    starts = []
    for job in rng.sample(jobs, min(len(jobs), rng.randint(0, 4))):
        partner = rng.choice(jobs)
        shares = (
            [{"partner_id": partner, "xi_self": 1.3, "xi_partner": 1.1, "t_seq_s": 40.0, "t_con_s": 31.5}]
            if rng.random() < 0.5 and partner != job
            else []
        )
        action = "preempt" if rng.random() < 0.2 else "start"
        starts.append(
            {
                "action": action,
                "job_id": job,
                "gpus": ["node-00:0"],
                "sub_batch": 32,
                "shares": shares,
                "reason": f"fits beside job {rng.choice(jobs)} of tenant team-a",
            }
        )
    waiting = rng.sample(jobs, min(len(jobs), rng.randint(0, 38)))
    Round.objects.create(
        started_at=at,
        finished_at=at,
        policy="sjf-bsbf",
        duration_ms=3.0,
        n_started=len(starts),
        n_waiting=len(waiting),
        n_preempted=0,
        decisions=starts,
        waits=pack_waits((j, f"waits behind job {rng.choice(jobs)}") for j in waiting),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_round_rows_equal_from_scratch_over_random_changes(
    viewers: list[Viewer], tenant_a: Tenant, tenant_c: Tenant, seed: int
) -> None:
    rng = random.Random(seed)
    tenants = [tenant_a, tenant_c]
    # most jobs team-a's, so a member has more waits in a round than are listed
    jobs = [
        make_job(rng.choice([tenant_a] * 4 + [tenant_c]), f"j{k}", status=Job.Status.PENDING).pk
        for k in range(40)
    ]
    now = NOW + timedelta(days=seed)
    for step in range(20):
        now += timedelta(seconds=rng.choice((1, 5, 30)))
        kind = rng.random()
        live = list(Job.objects.values_list("pk", flat=True))
        if kind < 0.5:
            _round(rng, now, jobs)
        elif kind < 0.65 and live:
            Job.objects.filter(pk=rng.choice(live)).update(name=f"renamed{step}")
        elif kind < 0.75 and live:
            Job.objects.filter(pk=rng.choice(live)).update(tenant=rng.choice(tenants))
        elif kind < 0.85 and live:
            Job.objects.filter(pk=rng.choice(live)).delete()
        elif live:
            Job.objects.filter(pk=rng.choice(live)).update(status=Job.Status.SUCCEEDED, finished_at=now)
        assert_same(viewers, now, rng.choice((3, 10)))


def test_a_kept_round_is_not_built_again(viewers: list[Viewer], tenant_a: Tenant) -> None:
    rng = random.Random(7)
    jobs = [make_job(tenant_a, f"j{k}", status=Job.Status.PENDING).pk for k in range(6)]
    now = NOW + timedelta(days=9)
    _round(rng, now, jobs)
    _round(rng, now + timedelta(seconds=1), jobs)
    built = mock.Mock(wraps=decisions._act_rows)  # noqa: SLF001 - the builder under test
    with mock.patch.object(decisions, "_act_rows", built):
        with mock.patch("django.utils.timezone.now", return_value=now + timedelta(seconds=2)):
            decisions.decisions_payload(viewers[0], 10)
        assert built.call_count == 2
        _round(rng, now + timedelta(seconds=3), jobs)
        with mock.patch("django.utils.timezone.now", return_value=now + timedelta(seconds=4)):
            decisions.decisions_payload(viewers[0], 10)
        assert built.call_count == 3  # only the new round
    Job.objects.filter(pk=jobs[0]).update(name="renamed")  # shown by some rounds: those built again
    assert_same(viewers, now + timedelta(seconds=5), 10)
