"""EASY backfilling around one reservation (Lifka 1995), for ``sjf-bsbf-fair``'s starving job.

A job that holds the round's reservation needs ``G_j`` GPUs; the *shadow time* is when enough of
them are expected to be free, from the running jobs' expected ends. Later jobs may start before
it only if they end by then or use GPUs the reserved job will not need (docs/FAIRNESS.md).
Times in s, counts in GPUs.
"""

from __future__ import annotations

from scheduling.core.types import Profile, Snapshot


def expected_free_times(snapshot: Snapshot, profile: Profile) -> dict[int, float]:
    """Busy healthy GPU id → when (s) it should be idle: the latest expected end of its running jobs,
    ``now + R_j · t_j(b_j)`` (remaining iterations at their sub-batch, exclusive speed — an
    estimate that ignores sharing slowdowns)."""
    frees: dict[int, float] = {}
    gpus = snapshot.cluster.gpus
    for rj in snapshot.running:
        end = snapshot.now + rj.job.remaining_iterations * profile.iter_time_s(rj.job, rj.placement.sub_batch)
        for g in rj.placement.gpu_ids:
            if 0 <= g < len(gpus) and gpus[g].healthy:
                frees[g] = max(frees.get(g, end), end)
    return frees


def shadow_time(frees: dict[int, float], idle: int, need: int, now: float) -> tuple[float, int]:
    """``(shadow time s, spare GPUs)`` of a reservation for ``need`` GPUs (EASY backfilling, Lifka
    1995): the expected instant at which ``idle`` plus the GPUs freed by then reach ``need``, and how
    many GPUs beyond ``need`` are idle at that instant. ``(now, 0)`` when the busy GPUs can never
    make up ``need`` (no backfill at all then)."""
    if need <= idle:
        return now, idle - need
    times = sorted(frees.values())
    if need - idle > len(times):
        return now, 0
    shadow = times[need - idle - 1]
    return shadow, idle + sum(1 for t in times if t <= shadow) - need
