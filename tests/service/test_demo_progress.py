"""The demo's progress: counted in the database (so it moves whichever process runs the rounds and
the agents), a bar on a terminal and plain lines on a pipe (honcho, a log), where a redrawn bar
shows nothing until its line ends — at the end of the run."""

from __future__ import annotations

import io
import threading
from types import SimpleNamespace

import pytest

from cluster.models import Job, Tenant
from demo.live import Clock, ProgressLines, wait_for_jobs


def test_progress_lines_say_what_changed_at_most_every_five_seconds() -> None:
    lines = ProgressLines(total=4)
    assert lines.line(0, 1, 0.0, 100.0) == "finished 0/4 jobs (0%); submitted 1; trace time 0 s"
    assert lines.line(0, 1, 250.0, 110.0) is None  # nothing changed
    assert lines.line(1, 2, 3000.0, 102.0) is None  # changed, but 2 s after the last line
    assert lines.line(1, 2, 3000.4, 105.0) == "finished 1/4 jobs (25%); submitted 2; trace time 3,000 s"
    assert lines.line(4, 4, 7650.0, 105.1, final=True) == (
        "finished 4/4 jobs (100%); submitted 4; trace time 7,650 s"
    )
    assert lines.line(4, 4, 7700.0, 200.0, final=True) is None  # said already


def test_a_quiet_run_says_its_progress_again_every_thirty_seconds() -> None:
    # a long last job: nothing changes for minutes; the line comes again with the trace time
    lines = ProgressLines(total=2)
    assert lines.line(1, 2, 100.0, 0.0) is not None
    assert lines.line(1, 2, 400.0, 29.9) is None
    assert lines.line(1, 2, 450.0, 30.0) == "finished 1/2 jobs (50%); submitted 2; trace time 450 s"
    assert lines.line(1, 2, 500.0, 40.0) is None  # 10 s after that one
    assert lines.line(1, 2, 900.0, 60.0) == "finished 1/2 jobs (50%); submitted 2; trace time 900 s"


@pytest.mark.django_db
def test_on_a_pipe_the_progress_is_lines_read_from_the_database() -> None:
    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=1)
    jobs = [
        Job.objects.create(tenant=tenant, name=f"j{i}", model="resnet50", batch_size=32, iterations=9, gpus=1)
        for i in range(2)
    ]
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(status=Job.Status.SUCCEEDED)
    replay = threading.Thread(target=lambda: None)
    replay.start()
    replay.join()
    run = SimpleNamespace(
        workload=SimpleNamespace(jobs=[object(), object()]),
        config=SimpleNamespace(timeout_s=5.0, progress=True),
        job_ids={j.pk: i for i, j in enumerate(jobs)},
        stop=threading.Event(),
        clock=Clock(0.0, 50.0),
        errors=[],
    )
    pipe = io.StringIO()  # not a terminal
    assert wait_for_jobs(run, replay, pipe) is True  # type: ignore[arg-type]
    (line,) = pipe.getvalue().splitlines()
    assert line.startswith("finished 2/2 jobs (100%); submitted 2; trace time ")
    assert "\r" not in pipe.getvalue()  # no bar redrawn on a pipe


@pytest.mark.django_db
def test_ended_jobs_are_asked_about_once_and_not_at_all_once_every_one_ended() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from demo.live import EndedJobs

    tenant, _ = Tenant.create_with_owner("team-a", quota_gpus=1)
    a, b, c = (
        Job.objects.create(tenant=tenant, name=f"j{i}", model="resnet50", batch_size=32, iterations=9, gpus=1)
        for i in range(3)
    )
    Job.objects.filter(pk__in=[a.pk, b.pk]).update(status=Job.Status.SUCCEEDED)
    ended = EndedJobs()
    assert ended.count([a.pk, b.pk, c.pk]) == 2
    Job.objects.filter(pk=c.pk).update(status=Job.Status.CANCELLED)
    with CaptureQueriesContext(connection) as asked:
        assert ended.count([a.pk, b.pk, c.pk]) == 3
    (query,) = asked.captured_queries
    assert str(c.pk) in query["sql"] and str(a.pk) not in query["sql"].split("WHERE", 1)[1]
    with CaptureQueriesContext(connection) as asked:
        assert ended.count([a.pk, b.pk, c.pk]) == 3
    assert asked.captured_queries == []  # every one ended: nothing to ask
