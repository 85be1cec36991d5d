"""Which tenant each job belongs to, remembered by this process.

A job's tenant is set when it is submitted and never changes: the API has no way to move a job,
the admin shows the field read-only (``cluster.admin.JobAdmin``), and a database never hands out
an id twice (PostgreSQL's sequences; SQLite's ``AUTOINCREMENT``, which Django gives its automatic
primary keys). So the reads a dashboard poll makes of the active placements (the quota panel's
use now, the open part of the windows' charge) need not join the jobs' table to learn each row's
tenant: on a busy 1,024-GPU cluster with 10,000 jobs that join was about 4 ms of each 6–8 ms read
(docs/PERFORMANCE.md §6, "Ninth pass"). Only the jobs this process has not seen yet are looked up,
in one query per :data:`LOOKUP_CHUNK` of them (after a round: the few jobs it started).

A database emptied and refilled under a running process (``manage.py flush`` resets the ids)
would give old ids to new jobs, maybe of other tenants: so the memory is dropped every
:data:`KEPT_S` seconds (the next read looks up every job of its rows once, ~1,300 on the
benchmark's cluster, a few ms), which bounds how long such a job could be charged to another
tenant, as the token cache's lifetime bounds a deleted token (``cluster.token_cache``). Tests
call :func:`forget` between tests (a rolled-back test's ids are given again at once).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from time import monotonic

from django.db import connection

from cluster.compiled import meta
from cluster.models import Job

#: Jobs looked up per query (under every backend's limit on bound parameters).
LOOKUP_CHUNK = 500
#: How many jobs this process remembers at least before it starts again from the ones asked for
#: (then at most four times as many as one call asks for): bounded by the jobs that hold GPUs.
KEPT_JOBS = 20_000
#: How long (s) the memory is kept before it starts again (module docstring).
KEPT_S = 60.0

# (when it was started, time.monotonic() s; job id → tenant id). Threads only add to the mapping
# or replace the pair whole (never remove from it), so a mapping a caller holds never loses the
# jobs it was given for.
_kept: tuple[float, dict[int, int]] = (-math.inf, {})


def tenants_of(job_ids: Collection[int]) -> Mapping[int, int]:
    """``{job id: tenant id}`` holding every job of ``job_ids`` that exists (a job deleted since
    its id was read is missing), looked up in the database only for the jobs this process has
    not seen in the last :data:`KEPT_S` s (module docstring). May hold other jobs too; read it,
    do not change it."""
    global _kept
    since, known = _kept
    now = monotonic()
    if now - since > KEPT_S:
        since, known = now, {}
    missing = [j for j in job_ids if j not in known]
    if not missing:
        return known
    if len(known) + len(missing) > max(KEPT_JOBS, 4 * len(job_ids)):
        # start again from the jobs asked for: the old ones have mostly left their GPUs
        known = {j: known[j] for j in job_ids if j in known}
    for k in range(0, len(missing), LOOKUP_CHUNK):
        known.update(_looked_up(missing[k : k + LOOKUP_CHUNK]))
    _kept = (since, known)
    return known


def _looked_up(job_ids: Sequence[int]) -> list[tuple[int, int]]:
    """``(job id, tenant id)`` of the jobs of ``job_ids`` that exist: one plain statement, not
    compiled by the ORM on every poll (as the dashboard's other per-poll reads,
    :mod:`cluster.compiled`)."""
    quote, options = connection.ops.quote_name, meta(Job)
    key = quote(options.pk.column)  # type: ignore[union-attr]
    tenant = quote(options.get_field("tenant").column)  # type: ignore[union-attr]
    marks = ", ".join(["%s"] * len(job_ids))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {key}, {tenant} FROM {quote(options.db_table)} WHERE {key} IN ({marks})", job_ids
        )
        return cursor.fetchall()


def with_tenants(rows: Iterable[tuple], job_at: int = 0) -> list[tuple]:
    """``rows`` with the tenant id of each row's job (column ``job_at``) put right after it, by
    :func:`tenants_of`; a row whose job no longer exists (deleted since the rows were read, with
    its placements) is left out."""
    rows = list(rows)
    tenants = tenants_of({r[job_at] for r in rows})
    after = job_at + 1
    return [r[:after] + (tenants[r[job_at]],) + r[after:] for r in rows if r[job_at] in tenants]


def forget() -> None:
    """Forget every job's tenant (for tests, whose databases give the same ids again)."""
    global _kept
    _kept = (-math.inf, {})
