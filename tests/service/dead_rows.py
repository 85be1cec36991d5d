"""Helpers of the PostgreSQL tests of reads that must not grow with the dead row versions of ended
jobs: one job's life written as the service writes it, and PostgreSQL's per-transaction counters of
the pages read (``pg_stat_get_xact_blocks_fetched``: from the buffer cache or disk).

A job's row gets a new version at each status change; the old version's entry in the
``job_status`` index stays until VACUUM (docs/PERFORMANCE.md §10).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

#: One job's life (its id in each %s), as the service writes it: placed on every GPU of the
#: cluster (the job running), progress, ended (the rows inactive, the job succeeded); each step
#: its own statement, so each leaves a dead version.
LIFE = (
    "INSERT INTO cluster_placement (job_id, gpu_id, generation, sub_batch, slot, active, created_at)"
    " SELECT %s, g.id, 1, 3, 0, true, now() FROM cluster_gpu g",
    "UPDATE cluster_job SET status = 'running', started_at = now() WHERE id = %s",
    "UPDATE cluster_job SET iterations_done = 5 WHERE id = %s",
    "UPDATE cluster_placement SET active = false, ended_at = now() WHERE job_id = %s",
    "UPDATE cluster_job SET status = 'succeeded', finished_at = now() WHERE id = %s",
)


def live_and_end(job_ids: list[int]) -> None:
    """Let the jobs ``job_ids`` live and end one after the other (:data:`LIFE`; plain SQL: 10,000
    statements through the ORM took 30 s)."""
    with connection.cursor() as cursor:
        for pk in job_ids:
            for sql in LIFE:
                cursor.execute(sql, [pk])


def job_pages_fetched() -> int:
    """Pages of ``cluster_job`` read (from the buffer cache or disk) so far in this transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_blocks_fetched('cluster_job'::regclass)")
        return int(cursor.fetchone()[0])


def pages_fetched() -> int:
    """Pages of every table and index of the schema read so far in this transaction, asked on
    the raw connection (outside Django's execute wrappers, so :func:`pages_per_statement` can
    ask it between statements)."""
    with connection.connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(pg_stat_get_xact_blocks_fetched(oid)) FROM pg_class"
            " WHERE relnamespace = current_schema()::regnamespace"
        )
        return int(cursor.fetchone()[0] or 0)


@contextmanager
def pages_per_statement() -> Iterator[list[tuple[str, int]]]:
    """``(sql, pages)`` of each statement Django sends inside the block, ``pages`` the schema's
    pages it read (:func:`pages_fetched`)."""
    seen: list[tuple[str, int]] = []

    def counted(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        before = pages_fetched()
        result = execute(sql, params, many, context)
        seen.append((sql, pages_fetched() - before))
        return result

    with connection.execute_wrapper(counted):
        yield seen
