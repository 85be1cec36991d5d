"""Every pending job in the order the policy considers them, kept per process between polls of
the queue endpoint (docs/PERFORMANCE.md, "Dashboard", sixth pass).

The order (:func:`policy_order`) depends only on the latest round (a round's record never
changes: its id names it), on which jobs are pending and of which tenant, and on the submission
times of those the round did not rank. Building it reads every pending job (6,000 rows in the
benchmark) and ranks them; a poll instead reads one aggregate of the pending jobs, the
*fingerprint* (count, sum of ids, sum of squared ids modulo :data:`SQUARE_MOD`, sum of tenant
ids), and while it and the latest round's id are those the kept order was built from, the
kept order is the answer. Any job submitted, started, cancelled, requeued or deleted changes the
count or the sum of ids unless another change makes up for it exactly in count, ids and squared
ids at once between two polls. Not seen: an edit of a pending job's ``submitted_at`` (the order
of the jobs the round did not rank) that keeps its id and tenant — the service never edits one.

The fingerprint of a built order is computed from the rows it was built from (not read apart),
so a change committed between the two reads cannot pair new rows with an old fingerprint.
Cache: this process's own copy only; an entry is never changed once kept (threads of one process
share it), a new one replaces it. A member's positions are kept beside it, for that entry only.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from django.db import connection
from django.db.models import F, QuerySet

from cluster.expressions import AnyOf
from cluster.models import Job
from frontend.payloads.common import raw_rows
from frontend.payloads.rounds import RoundView

#: Above this many jobs submitted since the latest round, the arrival order is sorted in SQL
#: over every pending job rather than over those newcomers.
SQL_SORT_ABOVE = 500

#: A prime: each squared id is taken modulo it, so a term is below 10^12 and a sum over a
#: million pending jobs stays within a 64-bit integer on SQLite (PostgreSQL's is exact anyway).
SQUARE_MOD = 1_000_003

Fingerprint = tuple[int, int, int, int]

# Job's table (Django's default name); written out: an aggregate the ORM would compile per call
# ("%%": the modulo operator, escaped from the parameter placeholders)
_FINGERPRINT_SQL = (
    "SELECT COUNT(id), CAST(COALESCE(SUM(id), 0) AS BIGINT), "
    f"CAST(COALESCE(SUM((id %% {SQUARE_MOD}) * (id %% {SQUARE_MOD})), 0) AS BIGINT), "
    "CAST(COALESCE(SUM(tenant_id), 0) AS BIGINT) FROM cluster_job WHERE status = %s"
)


@dataclass(frozen=True, slots=True)
class QueueOrder:
    """``ranked``: every pending job id in policy order (position = index + 1); ``owners``:
    ``{job id: tenant id}`` of those jobs; built for the round ``round_id`` (``None``: no round
    yet) and the pending jobs of ``fingerprint``."""

    round_id: int | None
    fingerprint: Fingerprint
    ranked: tuple[int, ...]
    owners: Mapping[int, int]


# the one kept order of this process ("order" → it), and a member's positions in it
# (tenant id → (the order, its positions))
_kept: dict[str, QueueOrder] = {}
_positions: dict[int, tuple[QueueOrder, tuple[tuple[int, int], ...]]] = {}


def policy_order(waiting: Container[int], latest: RoundView | None, arrivals: Sequence[int]) -> list[int]:
    """Pending job ids in the order the policy considers them.

    ``waiting``: the pending job ids (a set or a dict keyed by them); ``arrivals``: pending ids by
    ``(submitted_at, id)`` (every one, or at least those the latest round did not rank). The
    latest round lists its ``wait`` decisions in the policy's own order
    (``scheduling.core.placement`` appends them as it walks the sorted queue), so those still
    pending come first in that order; jobs submitted since (or requeued) follow by arrival, ties
    by id, as every policy breaks ties (``scheduling.core.policies``).
    """
    ranked = [j for j in latest.wait_order if j in waiting] if latest is not None else []
    seen = set(ranked)
    ranked.extend(j for j in arrivals if j not in seen)
    return ranked


def pending_fingerprint() -> Fingerprint:
    """The fingerprint of the pending jobs (module docstring; its first figure is their number):
    one query."""
    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL, [Job.Status.PENDING])
        count, ids, squares, tenants = (int(v) for v in cursor.fetchone())
    return count, ids, squares, tenants


def queue_order(fingerprint: Fingerprint, latest: RoundView | None, *, use_cache: bool = True) -> QueueOrder:
    """Every pending job in :func:`policy_order` for the round ``latest``: the kept order when
    ``fingerprint`` (:func:`pending_fingerprint`, read before ``latest``) and the round are those it
    was built for, else built from the pending jobs (1–2 queries) and kept."""
    round_id = latest.pk if latest is not None else None
    kept = _kept.get("order") if use_cache else None
    if kept is not None and kept.round_id == round_id and kept.fingerprint == fingerprint:
        return kept
    owners = dict(raw_rows(_pending().order_by().values_list("id", "tenant_id")))
    built = QueueOrder(round_id, _fingerprint_of(owners), tuple(_ranked(owners, latest)), owners)
    if use_cache:
        _kept["order"] = built
    return built


def positions(order: QueueOrder, tenant_id: int | None) -> tuple[tuple[int, int], ...]:
    """``(position among all, job id)`` of ``tenant_id``'s jobs in ``order``, in order (kept for
    the order they were listed from)."""
    found = _positions.get(tenant_id) if tenant_id is not None else None
    if found is not None and found[0] is order:
        return found[1]
    owners = order.owners
    listed = tuple((i, j) for i, j in enumerate(order.ranked, 1) if owners[j] == tenant_id)
    if tenant_id is not None and _kept.get("order") is order:
        _positions[tenant_id] = (order, listed)
    return listed


def kept() -> QueueOrder | None:
    """This process's kept order (``None``: none kept), to inspect."""
    return _kept.get("order")


def forget() -> None:
    """Drop this process's kept order: for tests that start a fresh database whose ids repeat."""
    _kept.clear()
    _positions.clear()


def _fingerprint_of(owners: Mapping[int, int]) -> Fingerprint:
    """The fingerprint (module docstring) of the pending jobs ``owners`` (``{id: tenant id}``),
    as :data:`_FINGERPRINT_SQL` computes it."""
    return (
        len(owners),
        sum(owners),
        sum((j % SQUARE_MOD) * (j % SQUARE_MOD) for j in owners),
        sum(owners.values()),
    )


def _pending() -> QuerySet[Job]:
    """The pending jobs (a queryset)."""
    return Job.objects.filter(status=Job.Status.PENDING)


def _ranked(owners: dict[int, int], latest: RoundView | None) -> list[int]:
    """Every pending job id (``owners``: ``{job id: tenant id}``) in :func:`policy_order`, the
    arrival order of those the latest round did not rank read from the database."""
    ranked = policy_order(owners, latest, ())  # the pending jobs the round ranked, in its order
    in_round = set(ranked)
    newcomers = [j for j in owners if j not in in_round]
    if len(newcomers) > SQL_SORT_ABOVE:  # sorting in SQL beats shipping the timestamps
        arrivals = list(_pending().order_by("submitted_at", "id").values_list("id", flat=True))
    elif newcomers:
        arrivals = list(
            _pending()
            .filter(AnyOf(F("id"), newcomers))
            .order_by("submitted_at", "id")
            .values_list("id", flat=True)
        )
    else:  # every pending job was ranked: nothing to ask
        arrivals = []
    return ranked + [j for j in arrivals if j not in in_round]  # = policy_order(owners, latest, arrivals)
