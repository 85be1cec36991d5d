"""The round's transaction (scheduling/service/persist.py) against a requeue of the same running
jobs (scheduling/service/jobs.py ``requeue``: a silent node's jobs, or those a heartbeat no longer
lists): both lock several jobs' rows, and their placement rows, and must take them in one order
(docs/LOCKS.md). PostgreSQL only (SQLite takes the whole database's lock).

- The round's preemption UPDATE locked the jobs in the order PostgreSQL scanned them (ascending
  key here), the requeue's ``select_for_update`` in ``Job.Meta.ordering`` (newest submission
  first): two jobs of one node preempted and requeued at once deadlocked.
- The round's partner update (``write_colocations``) locked the placement rows of the jobs whose
  GPU partner changed, in its scan order, without their jobs' rows; the requeue, holding the jobs'
  rows, ends their placement rows job after job: whichever order either used, one of the two
  placements of the jobs (which job's row comes first in the table) deadlocked.

Now every transaction locks the jobs it writes (and those whose placement rows it writes) first,
in one statement, by ascending key; placement rows only after.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from cluster.models import Job, Placement
from scheduling import service
from scheduling.core import types as core
from scheduling.service.jobs import requeue
from tests.service.lock_threads import (  # sent: the fixture, from any thread
    interleave,
    kinds,
    node_and_jobs,
    sent_from_any_thread,  # noqa: F401
    start,
)
from tests.service.test_rounds import FixedPolicy

pytestmark = [
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: PostgreSQL only"),
    pytest.mark.django_db(transaction=True),
]


def test_a_round_preempting_two_jobs_and_their_requeue_do_not_deadlock(sent: list[Any]) -> None:
    _, (old, new) = node_and_jobs(2)
    service.run_round(policy=FixedPolicy(starts=(start(old.pk, 0), start(new.pk, 1))))
    assert set(Job.objects.values_list("status", flat=True)) == {Job.Status.RUNNING}

    def hold() -> None:  # any transaction holding the older job's row for a moment (an event)
        Job.objects.select_for_update().filter(pk=old.pk).first()

    def preempt() -> None:  # queues for the older job first
        stop = (core.Preempt(old.pk, "test"), core.Preempt(new.pk, "test"))
        service.run_round(policy=FixedPolicy(preemptions=stop))

    def requeue_both() -> None:  # the heartbeat check's requeue of the node's two jobs
        requeue([old.pk, new.pk], timezone.now(), "node node-00 silent")

    errors = interleave(hold, preempt, requeue_both)
    assert not errors, [repr(e) for e in errors]
    # the round queued first and preempted both; the requeue then found them no longer running
    for job in (old, new):
        job.refresh_from_db()
        assert job.status == Job.Status.PENDING
        assert kinds(job) == ["placed", "preempted"]
    assert not Placement.objects.filter(active=True).exists()


@pytest.mark.parametrize("first", ["older", "newer"])
def test_a_rounds_partner_update_and_a_requeue_of_the_partners_do_not_deadlock(
    sent: list[Any], first: str
) -> None:
    _, (old, new, beside_old, beside_new) = node_and_jobs(4)
    # which partner's placement row comes first in the table (the round's partner UPDATE takes
    # them in that order): the older job's, or the newer one's
    order = [(old, 0), (new, 1)] if first == "older" else [(new, 1), (old, 0)]
    for job, gpu in order:
        service.run_round(policy=FixedPolicy(starts=(start(job.pk, gpu),)))
    held = Placement.objects.get(job=order[0][0], active=True)

    def hold() -> None:  # the placement row the partner UPDATE locks first (an event's write)
        Placement.objects.select_for_update().filter(pk=held.pk).first()

    def share() -> None:  # starts a job beside each: both running jobs get a partner update
        service.run_round(policy=FixedPolicy(starts=(start(beside_old.pk, 0), start(beside_new.pk, 1))))

    def requeue_both() -> None:  # their node's requeue: ends their placement rows job after job
        requeue([old.pk, new.pk], timezone.now(), "node node-00 silent")

    errors = interleave(hold, share, requeue_both)
    assert not errors, [repr(e) for e in errors]
    # the round started both partners first; the requeue then put the two old jobs back
    for job in (old, new):
        job.refresh_from_db()
        assert (job.status, kinds(job)) == (Job.Status.PENDING, ["placed", "requeued"])
    for job in (beside_old, beside_new):
        job.refresh_from_db()
        assert (job.status, kinds(job)) == (Job.Status.RUNNING, ["placed"])
    active = Placement.objects.filter(active=True).order_by("gpu__index")
    assert list(active.values_list("job_id", "gpu__index")) == [(beside_old.pk, 0), (beside_new.pk, 1)]
