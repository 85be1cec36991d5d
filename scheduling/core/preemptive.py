"""The round skeleton of the preemptive, exclusive baselines, SRTF and Tiresias (pure Python).

All jobs, pending and running, are ranked together by the policy's key; walking that ranking,
each job is admitted while its gang fits, running jobs not admitted are preempted, and admitted
pending jobs start on the GPUs left idle (:func:`preemptive_exclusive`).

What "fits" means follows ``SchedulerConfig.placement``:

- ``"spread"`` (ours): GPU counting — a job fits while its GPUs fit in the healthy GPUs not yet
  promised to higher-ranked jobs (a running job keeps its own GPUs and costs those of them not
  yet promised). A gang never waits for fragmentation.
- ``"consolidated"`` (the peers' ``yarn`` placement): the ranking is packed, in order, onto an
  empty copy of the cluster by the ``yarn`` rule (:class:`YarnPacker`), as Muri's and Tiresias'
  simulators do at every event (``CLUSTER.empty_infra()`` then ``ms_yarn_placement`` in rank
  order); a job fits if it finds room there. Admitted running jobs keep their GPUs (we never
  migrate a job, the peers' re-packing may), so an admitted pending job that finds no room on
  the real idle GPUs waits this round.

The pending jobs may come ranked already (``ranked_pending``, a policy's
:class:`~scheduling.core.ranking.PendingRanking` kept between rounds); otherwise they are
sorted here. Without ``explain``, once no GPU is left no further pending job is looked at (none
could start); the decisions are the same either way.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any

from scheduling.core.gpu_types import TypeCapacity
from scheduling.core.placement import never_fits_reason, start_on_idle
from scheduling.core.profile_cache import cached
from scheduling.core.quota import gate_for
from scheduling.core.round_state import RoundState
from scheduling.core.types import Job, Preempt, Profile, RoundDecisions, RunningJob, Snapshot, Start, Wait

_first = itemgetter(0)
_gang = attrgetter("gpus")


class YarnPacker:
    """GPU counts per node of an empty copy of the round's cluster, filled by the peers' ``yarn``
    rule (:meth:`RoundState.pick_consolidated`, on counts): a gang of at most one node's GPUs on
    the first node with room, a larger one on the first wholly free nodes plus one node for the
    rest. Only healthy GPUs count. O(nodes) per gang."""

    def __init__(self, state: RoundState) -> None:
        self.sizes = state.node_sizes
        self.free = [0] * len(self.sizes)
        for gpu in state.gpus:
            if gpu.healthy:
                self.free[state.node_of[gpu.id]] += 1
        self.total = sum(self.free)
        self.widest = max(self.sizes, default=0)

    def place(self, count: int) -> bool:
        """Take room for a gang of ``count`` GPUs if the rule finds it; whether it did."""
        free = self.free
        if count <= self.widest:
            for node, f in enumerate(free):
                if f >= count:
                    free[node] -= count
                    self.total -= count
                    return True
            return False
        whole: list[int] = []
        remaining = count
        for node, f in enumerate(free):
            if remaining >= self.sizes[node] and f == self.sizes[node]:
                whole.append(node)
                remaining -= f
        rest = None
        if remaining > 0:
            rest = next((n for n, f in enumerate(free) if n not in whole and f >= remaining), None)
            if rest is None:
                return False
            free[rest] -= remaining
        for node in whole:
            free[node] = 0
        self.total -= count
        return True


def preemptive_exclusive(
    snapshot: Snapshot,
    profile: Profile,
    policy: str,
    key: Callable[[Job], Any],
    *,
    explain: bool,
    ranked_pending: tuple[Sequence[Any], Sequence[Job]] | None = None,
    ranked_running: Sequence[tuple[Any, RunningJob]] | None = None,
) -> RoundDecisions:
    """One round of a preemptive, exclusive policy (SRTF, Tiresias; see the module docstring).

    ``key(job)``: the ranking key (smallest first; unique, e.g. ending with the job id, or a
    position; keys of one round compare with each other: tuples, or ints) of the running jobs,
    unless ``ranked_running`` gives each of them as ``(key, running job)`` in ascending key
    order, and of the pending ones, unless ``ranked_pending = (keys, jobs)`` gives them already
    sorted (the same keys). Running jobs not admitted are preempted; admitted pending jobs start
    on the GPUs left idle once the preempted jobs are gone (preemptions are applied before
    starts, see :class:`RoundDecisions`). Running jobs are never migrated. With quotas, a
    pending job is admitted only if the quota gate allows it (it does not reclaim lent GPUs, so
    borrowing is time-bounded).
    """
    consolidated = snapshot.config.placement == "consolidated"
    state = RoundState(snapshot, consolidated=consolidated)
    profile = cached(profile)
    gate = gate_for(snapshot, can_start=lambda j: never_fits_reason(j, state, profile) is None)
    min_sub = snapshot.config.min_sub_batch
    packer = YarnPacker(state) if consolidated else None
    promised: set[int] = set()
    free = state.healthy_count if packer is None else packer.total
    # several GPU types: count per type too (scheduling.core.gpu_types)
    kinds = TypeCapacity(state.gpus, state.types) if packer is None and not state.types.single else None
    running: Sequence[tuple[Any, RunningJob]] = (
        sorted(((key(rj.job), rj) for rj in snapshot.running), key=_first)
        if ranked_running is None
        else ranked_running
    )
    if ranked_pending is None:
        ranked = sorted(((key(job), job) for job in snapshot.pending), key=_first)
        pending_keys: Sequence[Any] = [k for k, _ in ranked]
        pending_jobs: Sequence[Job] = [j for _, j in ranked]
    else:
        pending_keys, pending_jobs = ranked_pending
    admitted: list[Job] = []
    preemptions: list[Preempt] = []
    waits: list[Wait] = []
    # for the quota gate: healthy GPUs held by running jobs not yet ranked (not idle for owners)
    later: dict[int, int] = {}
    gpus, n_gpus = state.gpus, len(state.gpus)
    usable = state.healthy_ids
    if gate is not None:  # nothing else reads it
        for rj in snapshot.running:
            for g in rj.placement.gpu_ids:
                if 0 <= g < n_gpus and gpus[g].healthy:
                    later[g] = later.get(g, 0) + 1
    ri = pi = 0
    n_running, n_pending = len(running), len(pending_jobs)
    smallest: int | None = None  # the smallest pending gang (GPUs), once needed
    while ri < n_running or pi < n_pending:
        if pi < n_pending and (ri == n_running or pending_keys[pi] < running[ri][0]):
            job = pending_jobs[pi]
            pi += 1
            if not explain and job.gpus > free:
                # it cannot be admitted (under the consolidated rule either: the packer holds
                # ``free`` GPUs in all), and no one asked why; none can once fewer GPUs are left
                # than the smallest pending gang (found only when it matters: O(n) at C speed)
                if free and smallest is None:
                    smallest = min(map(_gang, pending_jobs))
                if free == 0 or (smallest is not None and free < smallest):
                    pi = n_pending
                continue
            rank = ri + pi
            reason = never_fits_reason(job, state, profile)
            if reason is None and gate is not None and job.gpus <= free:
                reason = gate.refusal(job, free - job.gpus - len(later))
            fits = job.gpus <= free if packer is None else reason is None and packer.place(job.gpus)
            if (
                fits
                and reason is None
                and kinds is not None
                and not kinds.admit(job, state.types.allowed(job))
            ):
                fits = False
                reason = (
                    f"rank {rank} under {policy}: needs {job.gpus} GPUs of type "
                    f"{', '.join(sorted(state.types.allowed(job))) or 'none it may use'}, "
                    f"too few left after higher-ranked jobs"
                )
            if reason is None and fits:
                free = free - job.gpus if packer is None else packer.total
                admitted.append(job)
                if gate is not None:
                    gate.admit(job)
            elif explain:
                room = f"{free} left after higher-ranked jobs"
                if packer is not None and job.gpus <= free:
                    room = f"{free} left after higher-ranked jobs, none placeable by the consolidated rule"
                why = reason or f"rank {rank} under {policy}: needs {job.gpus} GPUs, {room}"
                waits.append(Wait(job.id, why))
            continue
        run_key, entry = running[ri]
        ri += 1
        healthy = usable.intersection(entry.placement.gpu_ids)
        if gate is not None:
            for g in healthy:
                later[g] -= 1
                if later[g] == 0 or g in promised:
                    del later[g]
        if packer is None:
            # exclusive GPUs: a running job's GPUs are rarely promised already (no set built then)
            cost = len(healthy) if promised.isdisjoint(healthy) else len(healthy - promised)
            keep = cost <= free and (kinds is None or kinds.keep(healthy - promised))
            if keep:
                free -= cost
        else:
            keep = packer.place(entry.job.gpus)
            free = packer.total
        if keep:
            promised |= healthy
        else:
            state.release(entry.placement.gpu_ids)
            if gate is not None:
                gate.release(entry.job)
            rank = ri + bisect_left(pending_keys, run_key)
            preemptions.append(
                Preempt(entry.job.id, f"rank {rank} under {policy}: its GPUs go to higher-ranked jobs")
            )
    starts: list[Start] = []
    for job in admitted:
        outcome = start_on_idle(state, job, profile, min_sub)
        if isinstance(outcome, Start):
            starts.append(outcome)
        elif explain:
            waits.append(Wait(job.id, outcome))
    return RoundDecisions(policy, snapshot.now, tuple(starts), tuple(preemptions), tuple(waits))
