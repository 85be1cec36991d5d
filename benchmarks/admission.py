"""Time to admission of a live run's jobs, per class: submission → the write of the job's first
placement (bench_kueue.py).

Why not the placement's own ``created_at``: it is the run's nominal start, the later of the
round's time (``Round.started_at``, taken before the round reads its snapshot) and the job's
``submitted_at`` (scheduling.service.persist.run_start). Before that rule a job committed while
the round was reading was placed "before" it was submitted (the "large" class of
``bench_kueue.py --jobs 90`` once showed a mean of −1.55 s on a loaded 2-core machine); with it
such a job counts 0 s, though its start was decided only when the round wrote it, a snapshot's
read (seconds, loaded) later. Admission is when the decision is written: the round's
``finished_at`` (taken when its placements are written, just before its commit), which comes
after the snapshot read, which comes after the job's commit, which comes after its
``submitted_at``: never negative, and never shortened. Both times are the server's
(``timezone.now`` in one process). The round that wrote a placement is the one whose
``[started_at, finished_at]`` holds its ``created_at`` (rounds never overlap: one lease).

(admission.py is a module the benchmarks import, not a benchmark: it runs nothing.)
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime


def first_placements(placements: Iterable[tuple[int, datetime]]) -> dict[int, datetime]:
    """Job pk → the ``created_at`` of its first placement, from ``(job pk, created_at)`` rows in
    any order (a gang has one row per GPU; a preempted and restarted job several)."""
    first: dict[int, datetime] = {}
    for job_pk, created in placements:
        if job_pk not in first or created < first[job_pk]:
            first[job_pk] = created
    return first


def admission_s(
    jobs: Iterable[tuple[int, int, datetime]],
    placements: Iterable[tuple[int, datetime]],
    rounds: Mapping[datetime, datetime | None],
    class_of: Callable[[int], str],
) -> tuple[dict[str, list[float]], int]:
    """Time to admission (s) of each placed job, by class, and how many placed jobs had no round
    to date them (left out).

    ``jobs``: ``(pk, GPUs, submitted_at)``; ``placements``: ``(job pk, created_at)``;
    ``rounds``: each round's ``started_at`` → its ``finished_at`` (``None``: unfinished);
    ``class_of``: GPUs → class name. A job's admission is the ``finished_at`` of the round that
    wrote its first placement (the latest round started at or before the placement's
    ``created_at``, if it finished at or after it) − its ``submitted_at``; a job never placed is
    not counted; one whose round is missing (pruned, or unfinished) is left out and counted.
    Raises ``KeyError`` (from ``class_of``) for a job of an unknown size."""
    first = first_placements(placements)
    starts = sorted(rounds)
    by_class: dict[str, list[float]] = defaultdict(list)
    undated = 0
    for job_pk, gpus, submitted in jobs:
        placed = first.get(job_pk)
        if placed is None:
            continue
        at = bisect.bisect_right(starts, placed) - 1
        written = rounds[starts[at]] if at >= 0 else None
        if written is None or written < placed:
            undated += 1
            continue
        by_class[class_of(gpus)].append((written - submitted).total_seconds())
    return dict(by_class), undated


if __name__ == "__main__":  # a module the benchmarks import: run, it says so (and answers --help)
    from cli_args import module_only

    raise SystemExit(module_only(__file__, __doc__))
