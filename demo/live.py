"""The live run's threads: the web service, the replay through the REST API, and the scheduler's
ticks on the compressed clock; waiting for the jobs to end.

Units: seconds (s) of trace time unless named wall.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from django.db import close_old_connections, connection
from django.db.models import F

from cluster.expressions import AnyOf
from cluster.models import Job
from demo.database import Setup
from demo.options import DemoConfig, DemoError
from demo.submit import BULK_SIZE, submit_jobs
from demo.workload import Workload
from scheduling import service
from scheduling.core import types as core

log = logging.getLogger(__name__)

#: Longest wait (wall s) of a demo round for the round lease while a partner update holds it
#: **(ours)**: the round then still runs at its trace time, as the simulator's does.
ROUND_LEASE_WAIT_S = 2.0


class Clock:
    """Trace time ↔ wall time: ``T = base + (monotonic() − t0) × speedup``."""

    def __init__(self, base: float, speedup: float) -> None:
        self.base = base
        self.speedup = speedup
        self.t0 = time.monotonic()
        self.epoch0 = time.time()

    def trace_now(self) -> float:
        """The trace time now (s)."""
        return self.base + (time.monotonic() - self.t0) * self.speedup

    def wait_until(self, trace_t: float, stop: threading.Event) -> bool:
        """Sleep until trace time ``trace_t``; ``False`` if ``stop`` was set meanwhile."""
        wall = self.t0 + (trace_t - self.base) / self.speedup
        return not stop.wait(max(0.0, wall - time.monotonic()))

    def of(self, when: datetime) -> float:
        """A database timestamp as trace time (s)."""
        return self.base + (when.timestamp() - self.epoch0) * self.speedup


@dataclass(slots=True)
class LiveRun:
    """The threads of a live run and what they share."""

    config: DemoConfig
    workload: Workload
    setup: Setup
    base_url: str
    clock: Clock
    #: The profile the emulated jobs truly run by (demo/truth.py); ``None``: the shipped table.
    truth: Any = None
    stop: threading.Event = field(default_factory=threading.Event)
    job_ids: dict[int, int] = field(default_factory=dict)  # database pk → trace job id
    errors: list[str] = field(default_factory=list)
    refused: set[int] = field(default_factory=set)  # trace job ids the API refused
    rounds: int = 0

    def replay(self) -> None:
        """POST every job at its (compressed) submit time, through the REST API; the jobs already
        due when one is sent go with it, in bulk submissions per tenant (:func:`due_batches`,
        demo/submit.py)."""
        jobs = self.workload.jobs
        try:
            i = 0
            while i < len(jobs):
                if not self.clock.wait_until(jobs[i].submit_time, self.stop):
                    return
                now, j = self.clock.trace_now(), i + 1
                while j < len(jobs) and jobs[j].submit_time <= now:
                    j += 1
                for tenant, due in due_batches(jobs[i:j]):
                    token = self.setup.tenant_tokens[tenant]
                    made, refused = submit_jobs(self.base_url, token, due, self.stop.wait)
                    self.job_ids.update(made)
                    self.errors.extend(refused)
                    self.refused.update({job.id for job in due} - set(made.values()))
                i = j
        except Exception as exc:  # the main thread reports it and stops
            log.exception("replay failed")
            self.errors.append(f"replay failed: {exc}")
            self.stop.set()
        finally:
            connection.close()

    def schedule(self) -> None:
        """One tick (heartbeat check, then a round) at every multiple of the round interval
        (trace time)."""
        interval = self.config.round_interval_s
        k = math.ceil(self.clock.base / interval)
        try:
            while self.clock.wait_until(k * interval, self.stop):
                # the lease may be busy with a partner update for a moment: wait for it
                done = service.tick(policy=self.config.policy, lease_wait_s=ROUND_LEASE_WAIT_S)
                if done.round is not None:
                    self.rounds += 1
                close_old_connections()
                k += 1
        except Exception as exc:
            log.exception("round failed")
            self.errors.append(f"round failed: {exc}")
            self.stop.set()
        finally:
            connection.close()


def due_batches(due: Sequence[core.Job], size: int = BULK_SIZE) -> list[tuple[str, list[core.Job]]]:
    """The jobs ``due`` together as bulk submissions: per tenant (in order of first appearance),
    its jobs in submission order, at most ``size`` a submission. Why per tenant and not at most
    ``size`` due jobs in all: a replay that fell behind with 30 tenants would otherwise send a
    handful of jobs a request (issue 16: the Kueue-shaped replay lagged that way). Raises
    ``ValueError`` for ``size`` < 1."""
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    by_tenant: dict[str, list[core.Job]] = {}
    for job in due:
        by_tenant.setdefault(job.tenant, []).append(job)
    return [(t, js[k : k + size]) for t, js in by_tenant.items() for k in range(0, len(js), size)]


def serve(host: str, port: int) -> tuple[Any, threading.Thread]:
    """Start the web service (Django's WSGI handler on :class:`demo.webserver.PooledWSGIServer`,
    static files served) in a thread. Returns the server (``server.server_address`` has the
    port; call ``shutdown()`` then ``server_close()``) and its thread. Raises
    :class:`DemoError` when the address is taken."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.servers.basehttp import WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application

    from demo.webserver import PooledWSGIServer

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

    try:
        server = PooledWSGIServer((host, port), QuietHandler, ipv6=":" in host)
    except OSError as exc:
        raise DemoError(f"cannot listen on {host}:{port} ({exc.strerror}); pass --port N") from None
    server.set_app(StaticFilesHandler(get_wsgi_application()))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="demo-web", daemon=True
    )
    thread.start()
    return server, thread


class QuietAgentConflicts(logging.Filter):
    """Drops ``django.request``'s "Conflict: /api/v1/agent/..." warnings (a 409 to a node agent's
    report, refused because its job was stopped or requeued meanwhile) while the demo shuts down."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        path = getattr(request, "path", "")
        return not (getattr(record, "status_code", None) == 409 and path.startswith("/api/v1/agent/"))


def wait_until_ready(
    base_url: str, timeout_s: float = 120.0, say: Callable[[str], None] | None = None, poll_s: float = 1.0
) -> None:
    """Poll ``base_url/readyz`` every ``poll_s`` wall seconds until it answers 200 (the separate
    processes start together: the web service may take a while). When the first poll fails,
    ``say`` is told once what is awaited, so the wait is not silent. Raises :class:`DemoError`
    after ``timeout_s``, naming the last failure."""
    deadline = time.monotonic() + timeout_s
    told = False
    while True:
        why = "no answer"
        try:
            with urllib.request.urlopen(f"{base_url}/readyz", timeout=5) as response:
                if response.status == 200:
                    return
                why = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:  # 503: up, but the database or the broker is not
            why = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            why = str(getattr(exc, "reason", exc))
        if time.monotonic() > deadline:
            raise DemoError(
                f"the web service at {base_url} did not answer /readyz within {timeout_s:g} s ({why})"
            )
        if not told and say is not None:
            say(f"waiting for the web service at {base_url} to answer /readyz (up to {timeout_s:g} s): {why}")
            told = True
        time.sleep(poll_s)


#: In line mode (stderr not a terminal: honcho, a log file), a progress line at most this often
#: (wall s), and only when something changed: a pipe shows a line only once it ends, so a
#: terminal's redrawn bar would stay silent there until the end.
PROGRESS_LINE_EVERY_S = 5.0
#: ... and when nothing changed for this long (wall s), the line again, its trace time moved on:
#: a long last job kept a run silent for minutes, which read as a hang.
PROGRESS_QUIET_S = 30.0


@dataclass(slots=True)
class ProgressLines:
    """The progress of a run as plain lines, for a stream that is not a terminal."""

    total: int
    every_s: float = PROGRESS_LINE_EVERY_S
    quiet_s: float = PROGRESS_QUIET_S
    _last: tuple[int, int] | None = None
    _at: float = -math.inf

    def line(
        self, done: int, submitted: int, trace_s: float, wall_s: float, *, final: bool = False
    ) -> str | None:
        """The line to print now (``None``: nothing new, or the last one is under ``every_s``
        wall seconds old, or nothing changed in the last ``quiet_s``); ``final`` prints the state
        once more if it changed."""
        state = (done, submitted)
        since = wall_s - self._at
        if state == self._last and (final or since < self.quiet_s):
            return None
        if state != self._last and not final and since < self.every_s:
            return None
        self._last, self._at = state, wall_s
        return (
            f"finished {done}/{self.total} jobs ({done / max(self.total, 1):.0%}); submitted {submitted}; "
            f"trace time {trace_s:,.0f} s"
        )


class EndedJobs:
    """How many of a run's jobs have ended (succeeded, failed or cancelled), counted in the
    database poll after poll.

    An ended job never runs again (those statuses are terminal), so each :meth:`count` asks only
    about the ids not yet seen ended, as one array parameter on PostgreSQL
    (:class:`cluster.expressions.AnyOf`), and nothing once all have ended. Asking about every id
    of the run on every poll (Django's ``pk__in``: one placeholder per id) cost the Kueue-shaped
    benchmark's main thread about 31 ms of CPU per job at 15,000 jobs, four polls a second —
    CPU the web threads, rounds and agents it measures did not get."""

    ENDED = (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED)

    def __init__(self) -> None:
        self._ended: set[int] = set()

    def count(self, job_ids: Iterable[int]) -> int:
        """How many of ``job_ids`` (the run's job ids so far) have ended; one query, none when
        every one of them was seen ended already."""
        waiting = [pk for pk in job_ids if pk not in self._ended]
        if waiting:
            # the status read, not filtered on (the planner would add the job_status index, whose
            # entries for dead row versions stay until VACUUM), and in no order
            rows = Job.objects.filter(AnyOf(F("pk"), waiting)).order_by().values_list("pk", "status")
            self._ended.update(pk for pk, status in rows if status in self.ENDED)
        return len(self._ended)


def wait_for_jobs(run: LiveRun, replay: threading.Thread, stream: TextIO | None = None) -> bool:
    """Block until every job of the workload has ended, the run failed, or ``config.timeout_s``
    wall seconds passed; whether all of them finished. Progress: the finished jobs counted in the
    database every 0.25 s (so it moves whichever process runs the rounds and agents), shown on
    ``stream`` (stderr) as a bar on a terminal, else as :class:`ProgressLines`."""
    from tqdm import tqdm  # only the demo needs it; slow to import

    stream = sys.stderr if stream is None else stream
    total = len(run.workload.jobs)
    deadline = None if run.config.timeout_s is None else time.monotonic() + run.config.timeout_s
    ended = EndedJobs()
    terminal = stream.isatty()
    lines = ProgressLines(total) if run.config.progress and not terminal else None
    done = 0
    with tqdm(
        total=total,
        unit="job",
        desc="finished",
        disable=not (run.config.progress and terminal),
        dynamic_ncols=True,
        file=stream,
    ) as bar:
        try:
            while not run.stop.is_set():
                done = ended.count(list(run.job_ids))  # a copy: the replay adds to it
                over = not replay.is_alive() and done >= len(run.job_ids)
                trace_now = run.clock.trace_now()
                if lines is not None:
                    text = lines.line(done, len(run.job_ids), trace_now, time.monotonic(), final=over)
                    if text is not None:
                        print(text, file=stream, flush=True)
                bar.n = done
                bar.set_postfix_str(
                    f"submitted {len(run.job_ids)}, trace time {trace_now:,.0f} s", refresh=False
                )
                bar.refresh()
                if over:
                    break
                if deadline is not None and time.monotonic() > deadline:
                    run.errors.append(f"gave up after {run.config.timeout_s:g} s (--timeout)")
                    break
                run.stop.wait(0.25)
        finally:
            connection.close()
    return not run.errors and len(run.job_ids) == total and done == total
