"""The indexes of the tables a round and a submission write (migrations ``cluster.0009``,
``cluster.0010`` and ``scheduling.0008``): each one is written on every insert, and on every
update of an indexed column, so none may duplicate another, and every lookup the code makes
still has one.

Redundant: a plain B-tree index whose columns lead another full (not partial) B-tree index's
columns (the longer one serves every lookup of the shorter, and the cascade of a foreign key), or
a ``varchar_pattern_ops``/``text_pattern_ops`` copy, which only a ``LIKE`` would use (no query
filters a status or a key with one). PostgreSQL only: SQLite adds neither copy.
"""

from __future__ import annotations

import pytest
from django.db import connection

from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.postgres]

TABLES = ("cluster_job", "cluster_placement", "cluster_jobevent", "scheduling_agentorder")

#: Lookups the code makes, as (table, leading columns an index must start with):
#: the snapshot's running jobs and the queue's pending ones (status), a tenant's pending count and
#: job list (tenant), the list's order (submitted_at), a job's placements and events, a GPU's
#: placements (the PROTECT check), the events' order in the admin (at), a node's orders by seq;
#: a tenant's earliest pending or running job and the jobs finished after a cutoff (the dashboard's
#: usage spans, scheduling.service.gpu_hours and closed_runs).
NEEDED = (
    ("cluster_job", ("status",)),
    ("cluster_job", ("tenant_id", "status", "submitted_at")),
    ("cluster_job", ("finished_at",)),
    ("cluster_job", ("submitted_at",)),
    ("cluster_job", ("submitter_id",)),
    ("cluster_placement", ("job_id",)),
    ("cluster_placement", ("gpu_id",)),
    ("cluster_jobevent", ("job_id",)),
    ("cluster_jobevent", ("at",)),
    ("scheduling_agentorder", ("node_id", "seq")),
)


def indexes(table: str) -> list[tuple[str, tuple[str, ...], bool, bool, tuple[str, ...]]]:
    """``(name, columns, unique, partial, operator classes)`` of each index on ``table``."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, i.indisunique, i.indpred IS NOT NULL,
                   array(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, n)
                         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                         ORDER BY k.n),
                   array(SELECT o.opcname FROM unnest(i.indclass) WITH ORDINALITY k(oid, n)
                         JOIN pg_opclass o ON o.oid = k.oid ORDER BY k.n)
            FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = %s::regclass
            """,
            [table],
        )
        return [
            (name, tuple(cols), unique, partial, tuple(ops)) for name, unique, partial, cols, ops in cursor
        ]


@pytest.fixture
def on_postgres(db: None) -> None:
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (DATABASE_URL=postgres://...)")


@pytest.mark.parametrize("table", TABLES)
def test_no_index_is_a_pattern_ops_copy(on_postgres: None, table: str) -> None:
    copies = [name for name, _, _, _, ops in indexes(table) if any(op.endswith("_pattern_ops") for op in ops)]
    assert copies == []


@pytest.mark.parametrize("table", TABLES)
def test_no_plain_index_leads_another(on_postgres: None, table: str) -> None:
    found = indexes(table)
    redundant = [
        (name, other)
        for name, cols, unique, partial, _ in found
        if not unique and not partial
        for other, longer, _, other_partial, _ in found
        if other != name and not other_partial and longer[: len(cols)] == cols
    ]
    assert redundant == []


@pytest.mark.parametrize(("table", "columns"), NEEDED)
def test_every_lookup_keeps_an_index(on_postgres: None, table: str, columns: tuple[str, ...]) -> None:
    leading = [
        name
        for name, cols, _, partial, _ in indexes(table)
        if not partial and cols[: len(columns)] == columns
    ]
    assert leading, f"no full index on {table} leads with {columns}"
