"""The wait decisions of a recorded round, stored compactly (``Round.waits``).

A round at 10,000 pending jobs makes about as many ``wait`` decisions, which mostly share a
handful of reasons ("needs 4 GPUs, 2 idle", a quota's words…). Stored as one dict per job in
``Round.decisions`` they were about 1.7 MB of JSON per round, encoded, sent, parsed by the
database and compressed. ``Round.waits`` holds them as::

    {"job_ids": [job id, ...],            # in the order decided (the policy's order)
     "reasons": [reason, ...],            # each distinct reason once, first seen first
     "reason_ids": [index into reasons, ...]}   # one per job id

about 17 times smaller (100 KB at 10,000 waits with 33 distinct reasons). ``Round.decisions``
keeps the starts and preemptions as dicts. Rows written before the change (migration
``scheduling.0006``) have every decision, waits included, in ``decisions`` and an empty
``waits``: the readers below take both, so old and new rows read alike. No Django here: the
shapes only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: ``Round.waits`` of a round without wait decisions (and of rows older than the field).
EMPTY: dict[str, list[Any]] = {"job_ids": [], "reasons": [], "reason_ids": []}


def pack_waits(waits: Iterable[tuple[int, str]]) -> dict[str, list[Any]]:
    """``Round.waits`` of ``waits`` = ``(job id, reason)`` in the order decided (a job may come
    twice; readers keep the last reason)."""
    index: dict[str, int] = {}
    job_ids: list[int] = []
    reason_ids: list[int] = []
    for job_id, reason in waits:
        i = index.get(reason)
        if i is None:
            i = index[reason] = len(index)
        job_ids.append(job_id)
        reason_ids.append(i)
    return {"job_ids": job_ids, "reasons": list(index), "reason_ids": reason_ids}


def unpack_waits(packed: Mapping[str, Any] | None) -> list[tuple[int, str]]:
    """``(job id, reason)`` of a ``Round.waits`` value, in order (``[]`` for ``None`` or an empty
    dict). Raises ``KeyError``/``IndexError`` for a value :func:`pack_waits` did not write."""
    if not packed or not packed.get("job_ids"):
        return []
    reasons = packed["reasons"]
    return [(int(j), str(reasons[r])) for j, r in zip(packed["job_ids"], packed["reason_ids"], strict=True)]


def wait_decisions(
    decisions: Sequence[Mapping[str, Any]] | None, packed: Mapping[str, Any] | None
) -> list[tuple[int, str]]:
    """Every ``(job id, reason)`` a round decided to leave waiting, in order: the ``wait`` dicts
    of ``decisions`` (rows older than ``Round.waits``, or written by hand), then ``packed``."""
    old = [(int(d["job_id"]), str(d.get("reason", ""))) for d in decisions or () if d.get("action") == "wait"]
    return old + unpack_waits(packed)


def wait_entry(job_id: int, reason: str) -> dict[str, Any]:
    """A wait decision in the dict shape of ``Round.decisions`` (``scheduling.models.Round``)."""
    return {
        "job_id": job_id,
        "action": "wait",
        "gpu_ids": [],
        "gpus": [],
        "sub_batch": None,
        "accum_steps": None,
        "shares": [],
        "reason": reason,
    }


def decision_list(
    decisions: Sequence[Mapping[str, Any]] | None, packed: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    """Every decision of a round as dicts of the shape documented on ``Round``: those of
    ``decisions`` as stored, then the waits of ``packed``."""
    return [dict(d) for d in decisions or ()] + [wait_entry(j, r) for j, r in unpack_waits(packed)]
