"""A report's output chunks applied set-wise (:func:`cluster.joblogs.append_outputs`, one
transaction, a fixed number of statements) store what the chunks applied one by one by the rules
of AGENT.md §2a store, and answer the same.

The reference is the one-chunk-at-a-time code the set-wise path replaced, kept here in the ORM
(:func:`reference_append`): the job's row locked, the 404/403 refusals, what is already stored
of the run skipped, a gap noted, the ``==> run <==`` header when another run wrote last, whole
old chunks deleted past ``SHAREWISE_JOB_LOG_MAX_CHARS``. Random scripts of chunks — several jobs
and runs, offsets in order, repeated, overlapping and past a gap, ``eof`` — are applied both
ways to two mirrored sets of jobs, in reports of 1 to 8 chunks set-wise, and must leave the same
log text, chunk rows, run rows and answers.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Length
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from cluster import joblogs
from cluster.joblog_models import JobLogChunk, JobLogRun
from cluster.joblogs import OutputChunk, OutputRefused, append_outputs, max_log_chars, read_output
from cluster.models import GPU, Job, Node, Placement, Tenant

NOW = datetime(2026, 12, 3, 12, 0, 0, 250_000, tzinfo=UTC)
RUNS = ("node-00/g1", "node-00/g2", "node-00/g3")


def reference_append(job_id: int, node: Node, c: OutputChunk, now: datetime) -> int | OutputRefused:
    """One chunk by the rules, alone in its transaction, through the ORM (the code before the
    set-wise path, cluster/joblogs.py at 46100d9, compilations and all)."""
    with transaction.atomic():
        if Job.objects.select_for_update().filter(pk=job_id).first() is None:
            return OutputRefused(404, f"job {job_id} does not exist")
        if not Placement.objects.filter(job_id=job_id, gpu__node=node).exists():
            return OutputRefused(403, f"job {job_id} was never placed on node {node.name}")
        found = JobLogRun.objects.filter(job_id=job_id, key=c.run).first()
        received = 0 if found is None else found.received
        if c.offset > received:
            note = f"[sharewise: {c.offset - received} characters of output were not received]\n"
            new = c.data
        else:
            note, new = "", c.data[received - c.offset :]
        if found is None:
            run = JobLogRun.objects.create(
                job_id=job_id,
                key=c.run,
                node=node.name,
                received=c.offset + len(c.data),
                eof=c.eof,
                updated_at=now,
            )
        else:
            run = found
        if note or new:
            text = note + new
            last = JobLogChunk.objects.filter(job_id=job_id).order_by("-offset").first()
            end = 0
            if last is not None:
                end = last.offset + len(last.text)
                if last.run_id != run.pk:
                    text = ("" if last.text.endswith("\n") else "\n") + f"==> {run.key} <==\n" + text
            JobLogChunk.objects.create(job_id=job_id, run=run, offset=end, text=text)
            cutoff = end + len(text) - max_log_chars()
            if cutoff > 0:
                JobLogChunk.objects.filter(job_id=job_id, offset__lt=cutoff).annotate(
                    e=F("offset") + Length("text")
                ).filter(e__lte=cutoff).delete()
        if found is not None:
            run.received = max(run.received, c.offset + len(c.data))
            run.eof = run.eof or c.eof
            run.updated_at = now
            run.save(update_fields=["received", "eof", "updated_at"])
    return run.received


def ever_placed(jobs: list[Job], node: Node) -> None:
    """Each of ``jobs`` placed once on ``node`` (a placement row that has ended)."""
    gpu = GPU.objects.filter(node=node).order_by("index").first()
    assert gpu is not None
    for job in jobs:
        Placement.objects.create(job=job, gpu=gpu, generation=1, sub_batch=1, active=False)


def new_jobs(tenant: Tenant, count: int) -> list[Job]:
    return [
        Job.objects.create(
            tenant=tenant, name=f"j{i}", model="resnet50", batch_size=64, iterations=10, gpus=1
        )
        for i in range(count)
    ]


def script(rng: random.Random, jobs: int, length: int) -> list[tuple[int, OutputChunk]]:
    """``length`` chunks of ``jobs`` jobs (index -1: the job never placed here, -2: no such job),
    each run's output a random text sent in order, again, overlapping, or past a gap."""
    streams: dict[tuple[int, str], str] = {}
    sent: dict[tuple[int, str], int] = {}
    out = []
    for _ in range(length):
        job = rng.choice([*range(jobs), *range(jobs), -1, -2])
        run = rng.choice(RUNS)
        stream = streams.setdefault(
            (job, run), "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 60)))
        )
        at = sent.get((job, run), 0)
        kind = rng.random()
        if kind < 0.5:
            offset = at  # in order
        elif kind < 0.7:
            offset = at + rng.randint(1, 9)  # past a gap
        else:
            offset = max(0, at - rng.randint(0, 8))  # a repeat or an overlap
        data = stream[offset : offset + rng.randint(0, 12)]
        sent[(job, run)] = max(at, offset + len(data))
        out.append((job, OutputChunk(0, run, offset, data, rng.random() < 0.15)))
    return out


def state(job: Job) -> tuple[Any, ...]:
    """What ``job``'s log holds: the text a reader gets, its chunk rows, its run rows."""
    piece = read_output(job, 0, 10**9, now=NOW)
    chunks = list(
        JobLogChunk.objects.filter(job=job).order_by("offset").values_list("offset", "text", "run__key")
    )
    runs = list(
        JobLogRun.objects.filter(job=job)
        .order_by("key")
        .values_list("key", "node", "received", "eof", "updated_at")
    )
    return piece.data, piece.first_offset, piece.next_offset, chunks, runs


def answer(got: int | OutputRefused) -> tuple[Any, ...]:
    return (got.status, str(got)) if isinstance(got, OutputRefused) else (200, got)


@pytest.mark.parametrize("seed", range(12))
def test_chunks_applied_set_wise_store_what_one_by_one_stores(
    fleet: dict, tenant: Tenant, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    if seed % 2:  # reports cut into slices of 3 chunks, each written before the next is read
        monkeypatch.setattr(joblogs, "SLICE_CHUNKS", 3)
    node, other = fleet["node-00"][0], fleet["node-01"][0]
    ours, theirs = new_jobs(tenant, 3), new_jobs(tenant, 3)  # set-wise, one by one
    ever_placed(ours + theirs, node)
    stranger = new_jobs(tenant, 1)[0]
    ever_placed([stranger], other)
    missing = 10**9
    cap = rng.choice([7, 30, 10**6])

    def ids(index: int, jobs: list[Job]) -> int:
        return {-1: stranger.pk, -2: missing}.get(index, jobs[index].pk if index >= 0 else 0)

    steps = script(rng, len(ours), 60)
    with override_settings(SHAREWISE_JOB_LOG_MAX_CHARS=cap):
        expected = [answer(reference_append(ids(j, theirs), node, c, NOW)) for j, c in steps]
        got: list[tuple[Any, ...]] = []
        while len(got) < len(steps):
            report = steps[len(got) : len(got) + rng.randint(1, 8)]
            chunks = [OutputChunk(ids(j, ours), c.run, c.offset, c.data, c.eof) for j, c in report]
            got += [answer(a) for a in append_outputs(node, chunks, NOW)]
    assert got == expected
    for mine, reference in zip(ours, theirs, strict=True):
        assert state(mine) == state(reference)
    assert not JobLogChunk.objects.filter(job=stranger).exists()
    assert not JobLogRun.objects.filter(job=stranger).exists()


def test_a_jobs_chunks_cost_a_fixed_number_of_statements_in_a_transaction_of_its_own(
    fleet: dict, tenant: Tenant
) -> None:
    """By hand, per job: chunks of runs new to the server lock the job with the refusals (1),
    read the runs (1), insert the new runs (1), read the job's last chunk (1), insert the chunks
    (1): 5; the next chunks of those runs: lock (1), runs (1), last chunk (1), chunks (1), the
    runs' update (1): 5; past the cap, the old chunks' delete: 6. Plus the job's transaction (a
    savepoint and its release inside the test's transaction): 7 and 8 a job, for 1 chunk of it as
    for 3 (two runs), and n times that for n jobs — one transaction each, so that none holds two
    jobs' rows (tests/service/test_chunks_lock_order.py)."""
    node = fleet["node-00"][0]

    def cost(chunks: list[OutputChunk]) -> tuple[int, list[str]]:
        with CaptureQueriesContext(connection) as seen:
            answers = append_outputs(node, chunks, NOW)
        assert all(isinstance(a, int) for a in answers)
        locks = [q["sql"] for q in seen.captured_queries if '"cluster_job" J' in q["sql"]]
        return len(seen.captured_queries), locks

    for n in (1, 4):
        jobs = new_jobs(tenant, n)
        ever_placed(jobs, node)
        first = [OutputChunk(j.pk, run, 0, "hello\n") for j in jobs for run in ("node-00/g1", "node-00/g2")]
        assert cost(first)[0] == n * (2 + 5)
        count, locks = cost([OutputChunk(j.pk, "node-00/g1", 6, "world\n") for j in jobs])
        assert count == n * (2 + 5)
        assert len(locks) == n and all(f"IN ({j.pk})" in lock for j, lock in zip(jobs, locks, strict=True))
        with override_settings(SHAREWISE_JOB_LOG_MAX_CHARS=6):
            assert cost([OutputChunk(j.pk, "node-00/g1", 12, "again\n") for j in jobs])[0] == n * (2 + 6)
        for job in jobs:  # 6 characters kept: only the last chunk stays
            assert read_output(job, 0, now=NOW).data == "again\n"
    # chunks that store nothing new (repeats): no last chunk read, no insert, only the runs' update
    assert cost([OutputChunk(j.pk, "node-00/g1", 0, "hello\n") for j in jobs])[0] == n * (2 + 3)
