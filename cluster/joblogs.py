"""Jobs' output: appending what agents send, bounded per job, and reading it back by offset.

Offsets count characters (Unicode code points) from the start of the job's log. Agents send
their runs' output in chunks, each at an offset within its own run (docs/AGENT.md §2a);
:func:`append_outputs` stores a report's chunks set-wise (:func:`append_output`: one alone), the
part not stored yet (a chunk delivered twice is stored once, one that overlaps what arrived is
cut), notes output an agent had to drop, and heads the output of a new run with
``==> node/g<generation> <==`` when the log already holds another run's (like ``tail`` with
several files). :func:`read_output` answers a reader. The models are
:mod:`cluster.joblog_models`.

Units: characters, seconds (s).
"""

from __future__ import annotations

from collections.abc import Sequence
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

#: Most chunks applied by one set of statements (:func:`append_outputs`; a report holds at most
#: 50, AGENT.md §2b): the trim's 3 parameters a job stay within SQLite's 999 **(ours)**.
SLICE_CHUNKS = 100
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


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """One chunk an agent sends (AGENT.md §2a): ``data``, the output of run ``run`` of job
    ``job_id`` from character ``offset`` of that run on; ``eof``: the run's output is complete."""

    job_id: int
    run: str
    offset: int
    data: str
    eof: bool = False


def append_output(
    job_id: int,
    node: Node,
    run_key: str,
    offset: int,
    data: str,
    eof: bool = False,
    now: datetime | None = None,
) -> int:
    """Store one chunk (:func:`append_outputs` of it alone): ``data``, the output of run
    ``run_key`` of job ``job_id`` on ``node`` from character ``offset`` of that run on; ``eof``:
    the run's output is complete. Returns how many characters of the run have arrived (the
    agent's next offset). Raises :class:`OutputRefused`: 404 the job does not exist, 403 it was
    never placed on ``node`` (AGENT.md §2a; nothing stored)."""
    (answer,) = append_outputs(node, [OutputChunk(job_id, run_key, offset, data, eof)], now)
    if isinstance(answer, OutputRefused):
        raise answer
    return answer


def append_outputs(
    node: Node, chunks: Sequence[OutputChunk], now: datetime | None = None
) -> list[int | OutputRefused]:
    """Store ``chunks`` of ``node``'s runs, in their order, one transaction per job; per chunk, in
    the same order: how many characters of its run have arrived after it (the agent's next
    offset), or the :class:`OutputRefused` it met — 404 the job does not exist, 403 it was never
    placed on ``node`` (AGENT.md §2a) — a refused chunk storing nothing.

    The rules, per chunk, as if each came alone and after the ones before it (a later chunk of a
    job or run sees the earlier ones): what is already stored of the run is skipped; a gap
    (``offset`` past what arrived: the agent dropped output it could not keep) is noted in the log
    as ``[sharewise: N characters of output were not received]``; output of another run than the
    one that wrote the job's log last is headed ``==> run <==``; past
    ``SHAREWISE_JOB_LOG_MAX_CHARS`` characters per job, whole chunks at the start are deleted.
    A job's log depends on its own chunks only, so the jobs are applied one after the other.

    Why set-wise: one transaction per chunk, each about five statements, was 8 % of the demo's
    CPU (PERFORMANCE.md §10, "Follow-up: a report's output chunks set-wise"), and on SQLite each
    transaction takes the database's write lock. Here a job's chunks, however many, cost a fixed
    number of statements: the job's row locked with both refusals (1), its runs (1), its last
    chunk (1), the new runs (1), the new chunks (1), the runs that were there (1), and the old
    chunks past the cap (1); a statement with nothing to do is not sent (past
    :data:`SLICE_CHUNKS` chunks, these per slice). Why one transaction per job, not one for the
    report: a transaction holding several jobs' rows deadlocked on PostgreSQL with the round's
    preemption UPDATE, which locks them in another order (tests/service/test_chunks_lock_order.py);
    holding one job's row, as each chunk did before, it waits for no other row. The job's row
    locked, two nodes of a gang append one after the other."""
    now = now or timezone.now()
    by_job: dict[int, list[int]] = {}  # job → the positions of its chunks, in order
    for i, c in enumerate(chunks):
        by_job.setdefault(c.job_id, []).append(i)
    answers: list[int | OutputRefused] = [0] * len(chunks)
    for positions in by_job.values():
        mine = [chunks[i] for i in positions]
        got: list[int | OutputRefused] = []
        with transaction.atomic():
            # in slices, each written before the next is read (the rules hold across them): a
            # statement's parameters stay within SQLite's 999 whatever the number of chunks
            for start in range(0, len(mine), SLICE_CHUNKS):
                got += _append_slice(node, mine[start : start + SLICE_CHUNKS], now)
        for i, answer in zip(positions, got, strict=True):
            answers[i] = answer
    return answers


def _append_slice(node: Node, chunks: Sequence[OutputChunk], now: datetime) -> list[int | OutputRefused]:
    """:func:`append_outputs` of at most :data:`SLICE_CHUNKS` chunks, inside its transaction."""
    ids = sorted({c.job_id for c in chunks})
    placed = dict(plain_rows.select(_placed_sql(connection.vendor, len(ids)), [node.pk, *ids], (None, None)))
    accepted = [c for c in chunks if placed.get(c.job_id)]
    pairs = {(c.job_id, c.run) for c in accepted}
    among = {"job": sorted({job for job, _ in pairs}), "key": sorted({key for _, key in pairs})}
    # the IN lists' cross product may hold another job's run key: only the pairs sent count
    found = [r for r in plain_rows.all_in(JobLogRun, among) if (r.job_id, r.key) in pairs]
    runs = {(r.job_id, r.key): r for r in found}
    answers: list[int | OutputRefused] = []
    pieces: list[tuple[int, JobLogRun, str]] = []  # (job, run, text) to store, in order
    for c in chunks:
        if c.job_id not in placed:
            answers.append(OutputRefused(404, f"job {c.job_id} does not exist"))
            continue
        if not placed[c.job_id]:
            answers.append(OutputRefused(403, f"job {c.job_id} was never placed on node {node.name}"))
            continue
        run = runs.get((c.job_id, c.run))
        received = 0 if run is None else run.received
        if c.offset > received:
            text = f"[sharewise: {c.offset - received} characters of output were not received]\n"
            text += c.data
        else:
            text = c.data[received - c.offset :]
        if run is None:
            # a new run's row is inserted below with the values it ends with (every writer of
            # a job's runs holds the job's row lock, so no other insert of it can race)
            run = JobLogRun(job_id=c.job_id, key=c.run, node=node.name, received=0, updated_at=now)
            runs[(c.job_id, c.run)] = run
        run.received = max(run.received, c.offset + len(c.data))
        run.eof = run.eof or c.eof
        run.updated_at = now
        if text:
            pieces.append((c.job_id, run, text))
        answers.append(run.received)
    stored = {r.pk for r in found}
    new_runs = [r for r in runs.values() if r.pk not in stored]
    plain_rows.insert_many(new_runs)  # first: the new chunks need their keys
    _store(pieces)
    plain_rows.update_many(found, ["received", "eof", "updated_at"])
    return answers


class OutputRefused(Exception):
    """Output ``node`` may not send (:func:`append_outputs`); ``status``: the HTTP status (403, 404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@cache
def _placed_sql(vendor: str, count: int) -> str:
    """Lock ``count`` jobs' rows and say for each whether it was ever placed on a node
    (parameters: the node's id, then the jobs' ids; rows: ``(job id, placed)``, none for a job
    that does not exist). :func:`append_outputs` locks one job at a time (a transaction holding
    several jobs' rows deadlocked with the round's preemption UPDATE); several rows would be
    locked by ascending key, as every locker of several jobs takes them (docs/LOCKS.md)."""
    q = connection.ops.quote_name
    j, p, g = meta(Job), meta(Placement), meta(GPU)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    key = f"J.{q(j.pk.column)}"
    return (
        f"SELECT {key}, EXISTS(SELECT 1 FROM {q(p.db_table)} P INNER JOIN {q(g.db_table)} G "
        f"ON P.{q(p.get_field('gpu').column)} = G.{q(g.pk.column)} "
        f"WHERE G.{q(g.get_field('node').column)} = %s "
        f"AND P.{q(p.get_field('job').column)} = {key}) "
        f"FROM {q(j.db_table)} J WHERE {key} IN ({plain_rows.marks(count)}) ORDER BY {key}{lock}"
    )


@cache
def _last_chunks_sql(vendor: str, count: int) -> str:
    """The job, offset, text and run of the last chunk of each of ``count`` jobs (parameters:
    the jobs' ids; none for a job without output). One index seek per job (its last row of the
    ``(job, offset)`` unique index, as ``ORDER BY offset DESC LIMIT 1``): a ``MAX(offset)``
    subquery correlated on each row read every chunk of the job, its cost growing with the log."""
    q = connection.ops.quote_name
    c = meta(JobLogChunk)
    offset, text, run, job = (q(c.get_field(n).column) for n in ("offset", "text", "run", "job"))
    one = (
        f"SELECT * FROM (SELECT {job}, {offset}, {text}, {run} FROM {q(c.db_table)} "
        f"WHERE {job} = %s ORDER BY {offset} DESC LIMIT 1) L{{}}"
    )
    return " UNION ALL ".join(one.format(k) for k in range(count))


@cache
def _trim_sql(vendor: str, count: int) -> str:
    """Delete, of each of ``count`` jobs, the chunks that end at or before its cut-off
    (parameters: per job its id, its cut-off twice)."""
    q = connection.ops.quote_name
    c = meta(JobLogChunk)
    offset, text, job = (q(c.get_field(n).column) for n in ("offset", "text", "job"))
    one = f"({job} = %s AND {offset} < %s AND {offset} + LENGTH({text}) <= %s)"
    return f"DELETE FROM {q(c.db_table)} WHERE {' OR '.join([one] * count)}"


def _store(pieces: list[tuple[int, JobLogRun, str]]) -> None:
    """Append each ``(job id, run, text)`` of ``pieces``, in order, at the end of its job's log
    (headed by its run's name where another run wrote last), then delete each job's whole chunks
    past the cap. The runs have their keys."""
    if not pieces:
        return
    jobs = sorted({job for job, _, _ in pieces})
    rows = plain_rows.select(_last_chunks_sql(connection.vendor, len(jobs)), jobs, (None, None, None, None))
    # per job: the end of its log and the run that wrote last
    last: dict[int, tuple[int, bool, int]] = {
        job: (offset + len(text), text.endswith("\n"), run_id) for job, offset, text, run_id in rows
    }
    new = []
    for job, run, text in pieces:
        end, newline, writer = last.get(job, (0, True, run.pk))
        if writer != run.pk:  # another run wrote last: say whose output follows
            text = ("" if newline else "\n") + f"==> {run.key} <==\n" + text
        new.append(JobLogChunk(job_id=job, run=run, offset=end, text=text))
        last[job] = (end + len(text), text.endswith("\n"), run.pk)
    plain_rows.insert_many(new)
    # the cap after each job's last piece: the chunks ending before it are all the ones each
    # piece's own cut-off would have deleted (cut-offs only grow, and a job's last chunk is kept)
    cap = max_log_chars()
    cuts = [(job, end - cap) for job, (end, _, _) in sorted(last.items()) if end - cap > 0]
    if cuts:
        plain_rows.run(
            _trim_sql(connection.vendor, len(cuts)), [v for job, cut in cuts for v in (job, cut, cut)]
        )


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
