"""One consistent view (TESTING.md invariant 12): a job that finishes while a round reads the
database never crashes or loses that round.

The finish is committed by another connection exactly between the snapshot's placement query and
its job query (the window where, under READ COMMITTED, the job's placement was read but the job
no longer was: a GPU resident without a job, ``KeyError`` in ``slowdown_of``). PostgreSQL only:
SQLite has one writer and its read transactions are one view already.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.models import Round
from scheduling.service import jobs as service_jobs
from scheduling.service import snapshot
from tests.conftest import skip_or_fail
from tests.service.invariants import assert_invariants
from tests.service.test_rounds import FixedPolicy, make_job

pytestmark = [pytest.mark.postgres]


def finish_in_another_connection(job_id: int) -> None:
    """Commit ``job_id``'s success from a fresh connection (another thread), as an agent would."""

    def finish() -> None:
        try:
            with transaction.atomic():
                job = Job.objects.select_for_update().get(pk=job_id)
                job.iterations_done = float(job.iterations)
                service_jobs.release(job, timezone.now(), Job.Status.SUCCEEDED, JobEvent.Kind.SUCCEEDED, "")
        finally:
            connection.close()

    thread = threading.Thread(target=finish)
    thread.start()
    thread.join(30)


@pytest.fixture
def finish_mid_snapshot(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Makes the next snapshot commit the finish of ``hook["job"]`` after its placement query
    (the job query's first expression is built right after it)."""
    hook: dict[str, Any] = {"job": None, "fired": False}
    real = snapshot.EpochSeconds

    def epoch_then_finish(*args: Any, **kwargs: Any) -> Any:
        if hook["job"] is not None and not hook["fired"]:
            hook["fired"] = True
            finish_in_another_connection(hook["job"])
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshot, "EpochSeconds", epoch_then_finish)
    return hook


def test_a_job_finishing_during_the_snapshot_neither_crashes_nor_loses_the_round(
    transactional_db: None, finish_mid_snapshot: dict[str, Any]
) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...) for a concurrent commit")
    Node.register("node-00", 1, 49_140, "v100")
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=1)
    done = make_job(tenant, "done-soon", iteration_time_s=0.5)
    waiting = make_job(tenant, "waiting", iteration_time_s=0.5)
    service.set_dispatcher(lambda messages: None)
    try:
        assert service.run_round(policy=FixedPolicy(starts=(core.Start(done.pk, (0,), 128, 1),))) is not None
        assert Job.objects.get(pk=done.pk).status == Job.Status.RUNNING
        # the next round shares GPU 0 with the job that finishes while the round reads
        finish_mid_snapshot["job"] = done.pk
        share = FixedPolicy(starts=(core.Start(waiting.pk, (0,), 128, 1),))
        record = service.run_round(policy=share)
    finally:
        service.set_dispatcher(None)
    assert finish_mid_snapshot["fired"], "the snapshot no longer builds EpochSeconds between its queries"
    # the round saw the job still running (one view, before the finish), and was recorded
    assert share.seen is not None and [r.job.id for r in share.seen.running] == [done.pk]
    assert record is not None and record.pk is not None and record.n_started == 1
    assert Round.objects.count() == 2
    assert Job.objects.get(pk=done.pk).status == Job.Status.SUCCEEDED
    assert Job.objects.get(pk=waiting.pk).status == Job.Status.RUNNING
    assert list(Placement.objects.filter(active=True).values_list("job_id", flat=True)) == [waiting.pk]
    assert_invariants()
