"""Jobs' output: appending what agents send, bounded per job, and reading it back by offset.

Offsets count characters (Unicode code points) from the start of the job's log. Agents send
their runs' output in chunks, each at an offset within its own run (docs/AGENT.md §2a);
:func:`append_output` stores the part not stored yet (a chunk delivered twice is stored once,
one that overlaps what arrived is cut), notes output an agent had to drop, and heads the output
of a new run with ``==> node/g<generation> <==`` when the log already holds another run's (like
``tail`` with several files). :func:`read_output` answers a reader. The models are
:mod:`cluster.joblog_models`.

Units: characters, seconds (s).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Length
from django.utils import timezone

from cluster import plain_rows
from cluster.compiled import meta
from cluster.joblog_models import JobLogChunk, JobLogRun
from cluster.models import GPU, Job, Node, Placement

#: Most characters one read returns; a reader asks again from ``next_offset`` for more.
MAX_READ_CHARS = 262_144
#: A job that ended this long ago (s) has its output complete even if a run never said so (a run
#: that printed nothing and whose agent had nothing to send) **(ours)**.
LOG_SETTLE_S = 2.0
#: A run silent this long (s) after its job ended is taken as over (its agent died) **(ours)**.
LOG_STALE_S = 60.0
TERMINAL = (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED)


def max_log_chars() -> int:
    """Characters kept per job (setting ``SHAREWISE_JOB_LOG_MAX_CHARS``); older output is dropped."""
    return int(settings.SHAREWISE_JOB_LOG_MAX_CHARS)


def log_extent(job_id: int) -> tuple[int, int]:
    """``(first, end)``: the offset of the oldest character kept and the offset just past the last
    one (``(0, 0)`` for a job without output)."""
    chunks = JobLogChunk.objects.filter(job_id=job_id)
    first = chunks.order_by("offset").values_list("offset", flat=True).first()
    last = chunks.order_by("-offset").annotate(n=Length("text")).values_list("offset", "n").first()
    if first is None or last is None:
        return 0, 0
    return first, last[0] + last[1]


def append_output(
    job_id: int,
    node: Node,
    run_key: str,
    offset: int,
    data: str,
    eof: bool = False,
    now: datetime | None = None,
) -> int:
    """Store ``data``, the output of run ``run_key`` of job ``job_id`` on ``node`` from character
    ``offset`` of that run on; ``eof``: the run's output is complete. Returns how many characters
    of the run have arrived (the agent's next offset).

    What is already stored is skipped; a gap (``offset`` past what arrived: the agent dropped
    output it could not keep) is noted in the log as ``[sharewise: N characters of output were
    not received]``. Past ``SHAREWISE_JOB_LOG_MAX_CHARS`` characters per job, whole chunks at the
    start are deleted. One transaction, the job's row locked, so two nodes of a gang append one
    after the other. Raises :class:`OutputRefused`: 404 the job does not exist, 403 it was never
    placed on ``node`` (AGENT.md §2a; nothing stored)."""
    now = now or timezone.now()
    with transaction.atomic():
        # the lock and both refusals in one statement (a chunk is sent per job and tick,
        # PERFORMANCE.md §10), and every statement here plain (cluster.plain_rows: the ORM's
        # compilation of each cost several times the statement)
        placed = plain_rows.select(_placed_sql(connection.vendor), [node.pk, job_id], (None,))
        if not placed:
            raise OutputRefused(404, f"job {job_id} does not exist")
        if not placed[0][0]:
            raise OutputRefused(403, f"job {job_id} was never placed on node {node.name}")
        found = plain_rows.get_by(JobLogRun, {"job": job_id, "key": run_key})
        received = 0 if found is None else found.received
        if offset > received:
            note = f"[sharewise: {offset - received} characters of output were not received]\n"
            new = data
        else:
            note, new = "", data[received - offset :]
        if found is None:
            # Every writer of a job's runs holds the job's row lock (above), so no other insert of
            # this run can race: a plain insert with the values it ends with, not get_or_create's
            # savepoint and a later UPDATE (a run's first chunk: 8 statements, now 5;
            # PERFORMANCE.md §10).
            run = JobLogRun(
                job_id=job_id,
                key=run_key,
                node=node.name,
                received=offset + len(data),
                eof=eof,
                updated_at=now,
            )
            plain_rows.insert(run)
        else:
            run = found
        if note or new:
            _store(job_id, run, note + new)
        if found is not None:
            run.received = max(run.received, offset + len(data))
            run.eof = run.eof or eof
            run.updated_at = now
            plain_rows.update(run, ["received", "eof", "updated_at"])
    return run.received


class OutputRefused(Exception):
    """Output ``node`` may not send (:func:`append_output`); ``status``: the HTTP status (403, 404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@cache
def _placed_sql(vendor: str) -> str:
    """Lock a job's row and say whether it was ever placed on a node (parameters: the node's id,
    the job's id; no row: no such job)."""
    q = connection.ops.quote_name
    j, p, g = meta(Job), meta(Placement), meta(GPU)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    return (
        f"SELECT EXISTS(SELECT 1 FROM {q(p.db_table)} P INNER JOIN {q(g.db_table)} G "
        f"ON P.{q(p.get_field('gpu').column)} = G.{q(g.pk.column)} "
        f"WHERE G.{q(g.get_field('node').column)} = %s "
        f"AND P.{q(p.get_field('job').column)} = J.{q(j.pk.column)}) "
        f"FROM {q(j.db_table)} J WHERE J.{q(j.pk.column)} = %s{lock}"
    )


@cache
def _last_chunk_sql(vendor: str) -> str:
    """The offset, text and run of a job's last chunk (parameter: the job's id)."""
    q = connection.ops.quote_name
    c = meta(JobLogChunk)
    offset, text, run, job = (q(c.get_field(n).column) for n in ("offset", "text", "run", "job"))
    return (
        f"SELECT {offset}, {text}, {run} FROM {q(c.db_table)} WHERE {job} = %s ORDER BY {offset} DESC LIMIT 1"
    )


def _store(job_id: int, run: JobLogRun, text: str) -> None:
    found = plain_rows.select(_last_chunk_sql(connection.vendor), [job_id], (None, None, None))
    last = found[0] if found else None
    end = 0
    if last is not None:
        end = last[0] + len(last[1])
        if last[2] != run.pk:  # another run wrote last: say whose output follows
            text = ("" if last[1].endswith("\n") else "\n") + f"==> {run.key} <==\n" + text
    plain_rows.insert(JobLogChunk(job_id=job_id, run=run, offset=end, text=text))
    cutoff = end + len(text) - max_log_chars()
    if cutoff > 0:
        JobLogChunk.objects.filter(job_id=job_id, offset__lt=cutoff).annotate(
            e=F("offset") + Length("text")
        ).filter(e__lte=cutoff).delete()


@dataclass(frozen=True, slots=True)
class LogPiece:
    """What a read returns: ``data`` from character ``offset`` to ``next_offset`` of the job's log;
    ``first_offset``: the oldest character still kept; ``complete``: the job has ended and all of
    its output has arrived (nothing after ``next_offset`` will come)."""

    offset: int
    next_offset: int
    data: str
    first_offset: int
    complete: bool


def read_output(
    job: Job, offset: int = 0, limit: int = MAX_READ_CHARS, now: datetime | None = None
) -> LogPiece:
    """The job's log from ``offset`` (negative: that many characters before the end; below the
    oldest character kept: from there), at most ``limit`` characters."""
    first, end = log_extent(job.pk)
    start = max(first, end + offset if offset < 0 else offset)
    start = min(start, end)
    data = ""
    if start < end:
        rows = (
            JobLogChunk.objects.filter(job_id=job.pk, offset__lt=start + limit)
            .annotate(e=F("offset") + Length("text"))
            .filter(e__gt=start)
            .order_by("offset")
            .values_list("offset", "text")
        )
        parts = []
        for chunk_offset, text in rows:
            parts.append(text[max(0, start - chunk_offset) :])
        data = "".join(parts)[:limit]
    return LogPiece(start, start + len(data), data, first, output_complete(job, now))


def output_complete(job: Job, now: datetime | None = None) -> bool:
    """Whether no more output of ``job`` will come: it has ended, none of its runs is still sending
    (one silent for :data:`LOG_STALE_S` after the end counts as over), and either every run said
    its output is complete or the end is :data:`LOG_SETTLE_S` old."""
    if job.status not in TERMINAL:
        return False
    now = now or timezone.now()
    stale = now - timedelta(seconds=LOG_STALE_S)
    runs = list(JobLogRun.objects.filter(job_id=job.pk).values_list("eof", "updated_at"))
    if any(not eof and updated > stale for eof, updated in runs):
        return False
    settled = job.finished_at is None or (now - job.finished_at).total_seconds() >= LOG_SETTLE_S
    return settled or bool(runs)
