"""GPU bookkeeping for one scheduling round, and gang selection (pure Python).

A :class:`RoundState` is built from a :class:`~scheduling.core.types.Snapshot` at the start of a
policy's ``decide`` and updated as the policy starts (or preempts) jobs within the round, so that a
GPU is never given twice and never holds more than two jobs (MODEL.md §2, "pairs"). Only healthy
GPUs are ever offered. Units: memory in MB, times in s, counts in GPUs.

Gang selection on idle GPUs (MODEL.md §3, "prefer one node, then the fewest nodes"): a gang that
fits on one node goes to the node with the fewest idle GPUs that still holds it (best fit, which
keeps whole nodes free for large gangs); otherwise the nodes with the most idle GPUs are taken
first (the fewest nodes), the last one again chosen by best fit. GPUs are always distinct. On a
cluster whose GPUs differ in memory, an exclusive start that those GPUs would hold only at a smaller
sub-batch (or not at all) than the job's ``G_j`` largest idle GPUs makes the same choice among the
idle GPUs with enough memory for that larger sub-batch (:func:`start_on_idle`).

The round skeletons the policies share live here too: :func:`exclusive_in_order` (FIFO, SJF),
:func:`preemptive_exclusive` (SRTF, Tiresias) and :func:`sharing_round` (SJF-FFS, SJF-BSBF, which
differ only in their :class:`PartnerFinder`).

Quotas (docs/FAIRNESS.md): when the snapshot carries tenant quotas, every skeleton asks one
:class:`~scheduling.core.quota.QuotaGate` before each start (cap, owners first, bounded
borrowing) and tells it of each start and preemption — one mechanism for all policies. Without
quotas the gate is ``None`` and nothing changes. A job refused by its quota never blocks others.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from scheduling.core.quota import QuotaGate, gate_for
from scheduling.core.types import (
    GPU,
    Job,
    JobId,
    Preempt,
    Profile,
    RoundDecisions,
    RunningJob,
    Share,
    Snapshot,
    Start,
    Wait,
)


class CachedProfile:
    """A memoising wrapper around a :class:`~scheduling.core.types.Profile` for one round.

    Answers are cached by the job fields a profile may depend on: ``(model, batch_size, gpus,
    memory_mb)`` for memory, sub-batches and slowdowns, plus ``iter_time_s`` for iteration times.
    A profile whose answers depend on anything else of a job (its id, tenant, progress) must not be
    wrapped. Raises whatever the wrapped profile raises.
    """

    __slots__ = ("_inner", "_iter", "_mem", "_subs", "_xi")

    def __init__(self, inner: Profile) -> None:
        self._inner = inner
        self._iter: dict[tuple, float] = {}
        self._mem: dict[tuple, float] = {}
        self._subs: dict[tuple, tuple[int, ...]] = {}
        self._xi: dict[tuple, tuple[float, float]] = {}

    @staticmethod
    def shape(job: Job) -> tuple:
        """The key of everything but speed: ``(model, batch_size, gpus, memory_mb)``."""
        return (job.model, job.batch_size, job.gpus, job.memory_mb)

    @property
    def size(self) -> int:
        """Number of answers cached."""
        return len(self._iter) + len(self._mem) + len(self._subs) + len(self._xi)

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        """``t_j(b)`` (s), memoised."""
        key = (job.model, job.batch_size, job.gpus, job.memory_mb, job.iter_time_s, sub_batch)
        value = self._iter.get(key)
        if value is None:
            value = self._iter[key] = self._inner.iter_time_s(job, sub_batch)
        return value

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        """``mem_j(b)`` (MB per GPU), memoised."""
        key = (job.model, job.batch_size, job.gpus, job.memory_mb, sub_batch)
        value = self._mem.get(key)
        if value is None:
            value = self._mem[key] = self._inner.memory_mb(job, sub_batch)
        return value

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        """Feasible sub-batch sizes, largest first, memoised."""
        key = (job.model, job.batch_size, job.gpus, job.memory_mb, min_sub_batch)
        value = self._subs.get(key)
        if value is None:
            value = self._subs[key] = tuple(self._inner.sub_batches(job, min_sub_batch))
        return value

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        """``(ξ_a, ξ_b)``, memoised."""
        key = (
            a.model,
            a.batch_size,
            a.gpus,
            a.memory_mb,
            sub_a,
            b.model,
            b.batch_size,
            b.gpus,
            b.memory_mb,
            sub_b,
        )
        value = self._xi.get(key)
        if value is None:
            value = self._xi[key] = tuple(self._inner.slowdown(a, sub_a, b, sub_b))
        return value


def cached(profile: Profile) -> CachedProfile:
    """``profile`` wrapped in a fresh :class:`CachedProfile` (unless it already is one)."""
    return profile if isinstance(profile, CachedProfile) else CachedProfile(profile)


@dataclass(slots=True)
class Resident:
    """A running job that runs alone on ``gpu_ids`` (each holding only it), which a waiting job
    may share (MODEL.md §3, "ones holding exactly one job whose memory leaves room").

    ``room_mb``: the smallest free memory over ``gpu_ids`` once the reserve is kept (MB).
    """

    job: Job
    sub_batch: int
    gpu_ids: tuple[int, ...]
    room_mb: float


class ResidentListener(Protocol):
    """Told when a resident is offered or withdrawn (a policy's index of partners)."""

    def added(self, resident: Resident) -> None: ...

    def removed(self, resident: Resident) -> None: ...


class RoundState:
    """Who holds which GPU during one round; mutable, private to one ``decide`` call.

    - idle GPUs: healthy GPUs holding no job, grouped by node;
    - residents (only with ``track_sharing=True``): running jobs alone on healthy GPUs with memory
      room, and jobs started alone this round; ``shareable_count`` counts their GPUs.

    A running job that shares any GPU is not a resident **(ours)**: the pairwise rule assumes the
    partner runs alone. A GPU with two jobs, or an unhealthy GPU, is never offered.
    """

    def __init__(self, snapshot: Snapshot, profile: Profile | None = None, *, track_sharing: bool = False):
        self.gpus: tuple[GPU, ...] = snapshot.cluster.gpus
        self.reserve_mb = snapshot.config.memory_reserve_mb
        self.min_sub_batch = snapshot.config.min_sub_batch
        self.can_share = track_sharing and snapshot.config.max_jobs_per_gpu >= 2
        self.profile = profile
        n = len(self.gpus)
        self.load = [0] * n
        self.node_of: list[int] = []
        self.node_names: list[str] = []
        ordinal: dict[str, int] = {}
        for gpu in self.gpus:
            if gpu.node not in ordinal:
                ordinal[gpu.node] = len(self.node_names)
                self.node_names.append(gpu.node)
            self.node_of.append(ordinal[gpu.node])
        for rj in snapshot.running:
            for g in rj.placement.gpu_ids:
                if 0 <= g < n:
                    self.load[g] += 1
        self._idle: list[dict[int, None]] = [{} for _ in self.node_names]
        for gpu in self.gpus:
            if gpu.healthy and self.load[gpu.id] == 0:
                self._idle[self.node_of[gpu.id]][gpu.id] = None
        per_node = [0] * len(self.node_names)
        for node in self.node_of:
            per_node[node] += 1
        self._widest = max(per_node, default=0)
        self._by_free: list[dict[int, None]] = [{} for _ in range(self._widest + 1)]
        for node, idle in enumerate(self._idle):
            self._by_free[len(idle)][node] = None
        self.idle_count = sum(len(idle) for idle in self._idle)
        self.healthy_count = sum(1 for g in self.gpus if g.healthy)
        self.memory_desc_mb = healthy_memory_desc(snapshot)
        self.largest_memory_mb = self.memory_desc_mb[0] if self.memory_desc_mb else 0
        # every healthy GPU has the same memory: any idle set fits a job as well as any other, so
        # the choice of idle GPUs needs no memory floor (the fast path of start_on_idle)
        self.uniform_memory = not self.memory_desc_mb or self.memory_desc_mb[0] == self.memory_desc_mb[-1]
        self.fits_some_gpu: dict[tuple, bool] = {}  # job shape → fits its G largest GPUs at some sub-batch
        self.residents: dict[JobId, Resident] = {}
        self.shareable_count = 0
        self.listener: ResidentListener | None = None
        if self.can_share:
            if profile is None:
                raise ValueError("tracking sharing needs a profile (memory of the running jobs)")
            for rj in snapshot.running:
                self._add_running_resident(rj)

    # -- idle GPUs ------------------------------------------------------------------------------

    def pick_idle(self, count: int) -> tuple[int, ...] | None:
        """``count`` distinct idle GPU ids (sorted), one node if possible, else the fewest nodes;
        ``None`` when fewer than ``count`` GPUs are idle. Does not take them (see :meth:`take`)."""
        if count < 1 or count > self.idle_count:
            return None
        node = self._best_fit(count, ())
        if node is not None:
            return tuple(sorted(self._idle[node])[:count])
        chosen: list[int] = []
        remaining = count
        level = self._widest
        while remaining > 0:
            node = self._best_fit(remaining, chosen)
            if node is not None:
                chosen.append(node)
                break
            while not any(n not in chosen for n in self._by_free[level]):
                level -= 1
            node = next(n for n in self._by_free[level] if n not in chosen)
            chosen.append(node)
            remaining -= level
        picked: list[int] = []
        for node in chosen:
            picked.extend(sorted(self._idle[node])[: count - len(picked)])
        return tuple(sorted(picked))

    def pick_idle_with_memory(self, count: int, floor_mb: float) -> tuple[int, ...] | None:
        """``count`` distinct idle GPU ids (sorted) each with at least ``floor_mb`` MB of memory,
        chosen as :meth:`pick_idle` chooses among all idle GPUs: one node if possible (the node
        with the fewest such GPUs that still holds the gang), else the nodes with the most such
        GPUs first and the last one by best fit; ties go to the node listed first in the cluster,
        and within a node the lowest GPU ids are taken. ``None`` when fewer than ``count`` idle
        GPUs have ``floor_mb`` MB. Does not take them. O(idle GPUs + nodes · log nodes)."""
        if count < 1 or count > self.idle_count:
            return None
        gpus = self.gpus
        eligible: list[tuple[int, int, list[int]]] = []  # (number of GPUs, node ordinal, sorted ids)
        total = 0
        for node, idle in enumerate(self._idle):
            ids = sorted(g for g in idle if gpus[g].memory_mb >= floor_mb)
            if ids:
                eligible.append((len(ids), node, ids))
                total += len(ids)
        if total < count:
            return None
        picked: list[int] = []
        remaining = count
        rest = sorted(eligible, key=lambda e: (-e[0], e[1]))  # most such GPUs first
        while remaining > 0:
            fit = min((e for e in rest if e[0] >= remaining), key=lambda e: (e[0], e[1]), default=None)
            if fit is not None:
                picked.extend(fit[2][:remaining])
                break
            first = rest.pop(0)
            picked.extend(first[2])
            remaining -= first[0]
        return tuple(sorted(picked))

    def idle_memory_desc(self, count: int) -> int | None:
        """The ``count``-th largest memory (MB) among the idle GPUs — the most memory per GPU any
        gang of ``count`` idle GPUs can offer — or ``None`` when fewer than ``count`` are idle."""
        if count < 1 or count > self.idle_count:
            return None
        gpus = self.gpus
        return heapq.nlargest(count, (gpus[g].memory_mb for idle in self._idle for g in idle))[-1]

    def _best_fit(self, count: int, exclude: Iterable[int]) -> int | None:
        """The first node (in bucket order) with the fewest idle GPUs ≥ ``count``, not excluded."""
        for level in range(count, self._widest + 1):
            for node in self._by_free[level]:
                if node not in exclude:
                    return node
        return None

    def _set_idle(self, gpu_id: int, idle: bool) -> None:
        node = self.node_of[gpu_id]
        bucket = self._idle[node]
        if (gpu_id in bucket) == idle:
            return
        del self._by_free[len(bucket)][node]
        if idle:
            bucket[gpu_id] = None
            self.idle_count += 1
        else:
            del bucket[gpu_id]
            self.idle_count -= 1
        self._by_free[len(bucket)][node] = None

    def take(self, gpu_ids: Iterable[int]) -> None:
        """Record one more job on each of ``gpu_ids`` (they stop being idle)."""
        for g in gpu_ids:
            self.load[g] += 1
            self._set_idle(g, False)

    def release(self, gpu_ids: Iterable[int]) -> None:
        """Record one job fewer on each of ``gpu_ids`` (a preemption); healthy GPUs left empty
        become idle again."""
        for g in gpu_ids:
            self.load[g] = max(0, self.load[g] - 1)
            if self.load[g] == 0 and self.gpus[g].healthy:
                self._set_idle(g, True)

    # -- residents (sharing policies) -------------------------------------------------------------

    def _room_mb(self, gpu_ids: Iterable[int], used_mb: float) -> float:
        return min(self.gpus[g].memory_mb for g in gpu_ids) - used_mb - self.reserve_mb

    def _add_running_resident(self, rj: RunningJob) -> None:
        gpu_ids = rj.placement.gpu_ids
        if any(not (0 <= g < len(self.gpus)) or self.load[g] != 1 for g in gpu_ids):
            return  # shares a GPU (or a GPU unknown to this cluster): not alone
        candidates = tuple(sorted(g for g in gpu_ids if self.gpus[g].healthy))
        if candidates:
            self.add_resident(rj.job, rj.placement.sub_batch, candidates)

    def add_resident(self, job: Job, sub_batch: int, gpu_ids: tuple[int, ...]) -> Resident | None:
        """Offer ``job`` (alone on ``gpu_ids`` at ``sub_batch``) as a sharing partner, if its memory
        leaves room; returns the :class:`Resident` or ``None``."""
        if not self.can_share or not gpu_ids:
            return None
        assert self.profile is not None
        room = self._room_mb(gpu_ids, self.profile.memory_mb(job, sub_batch))
        if room <= 0:
            return None
        resident = Resident(job, sub_batch, gpu_ids, room)
        self.residents[job.id] = resident
        self.shareable_count += len(gpu_ids)
        if self.listener is not None:
            self.listener.added(resident)
        return resident

    def remove_resident(self, job_id: JobId) -> Resident | None:
        """Stop offering ``job_id`` as a partner (it now shares); returns what was removed."""
        resident = self.residents.pop(job_id, None)
        if resident is not None:
            self.shareable_count -= len(resident.gpu_ids)
            if self.listener is not None:
                self.listener.removed(resident)
        return resident


# -- helpers shared by the policies ------------------------------------------------------------------


def arrival_key(job: Job) -> tuple[float, JobId]:
    """FIFO order: ``(submit_time, id)`` — also every policy's tie-break."""
    return (job.submit_time, job.id)


sjf_key: Callable[[Job], tuple[float, float, JobId]] = attrgetter("remaining_time_s", "submit_time", "id")
"""SJF order: ``(P_j, submit_time, id)`` with ``P_j`` = remaining exclusive time (s), MODEL.md §1."""


def healthy_memory_desc(snapshot: Snapshot) -> list[int]:
    """Memory (MB) of the healthy GPUs, largest first."""
    return sorted((g.memory_mb for g in snapshot.cluster.gpus if g.healthy), reverse=True)


def unfit_reason(job: Job, memory_desc_mb: Sequence[int], profile: Profile, min_sub_batch: int) -> str | None:
    """Why ``job`` can never start on healthy GPUs of these memories (MB, largest first), or
    ``None`` if it can: a gang of no GPU, a gang larger than the healthy GPUs, or memory per GPU
    above its ``G_j``-th largest healthy GPU at every sub-batch down to ``min_sub_batch`` (a gang
    runs one sub-batch on ``G_j`` GPUs, so its smallest GPU must hold it)."""
    if job.gpus < 1:
        return f"asks for {job.gpus} GPUs; a job needs at least one"
    if job.gpus > len(memory_desc_mb):
        return (
            f"needs {job.gpus} GPUs but the cluster has only {len(memory_desc_mb)} healthy GPUs: "
            f"it cannot start until more GPUs are healthy"
        )
    room = memory_desc_mb[job.gpus - 1]
    if largest_fitting_sub_batch(profile, job, room, min_sub_batch) is None:
        where = (
            "the largest healthy GPU"
            if job.gpus == 1 or room == memory_desc_mb[0]
            else f"the {job.gpus} largest healthy GPUs together (the smallest of them)"
        )
        return (
            f"needs more memory per GPU than {where} ({room} MB) at every sub-batch down to {min_sub_batch}"
        )
    return None


def start_checker(snapshot: Snapshot, profile: Profile) -> Callable[[Job], bool]:
    """A predicate: could the job ever start on the snapshot's healthy GPUs (:func:`unfit_reason`
    is ``None``)? Answers are cached per job shape for the life of the predicate (one round)."""
    memory_desc = healthy_memory_desc(snapshot)
    min_sub = snapshot.config.min_sub_batch
    fits: dict[tuple, bool] = {}

    def can_start(job: Job) -> bool:
        shape = CachedProfile.shape(job)
        answer = fits.get(shape)
        if answer is None:
            answer = fits[shape] = unfit_reason(job, memory_desc, profile, min_sub) is None
        return answer

    return can_start


def never_fits_reason(job: Job, state: RoundState, profile: Profile) -> str | None:
    """:func:`unfit_reason` on the round's healthy GPUs, cached per job shape. Such a job waits
    with this reason and never blocks others."""
    shape = CachedProfile.shape(job)
    fits = state.fits_some_gpu.get(shape)
    if fits is None:
        reason = unfit_reason(job, state.memory_desc_mb, profile, state.min_sub_batch)
        state.fits_some_gpu[shape] = reason is None
        return reason
    return None if fits else unfit_reason(job, state.memory_desc_mb, profile, state.min_sub_batch)


def largest_fitting_sub_batch(profile: Profile, job: Job, room_mb: float, min_sub_batch: int) -> int | None:
    """The largest sub-batch of ``job`` whose memory per GPU is ≤ ``room_mb`` (MB), or ``None``.

    Gradient accumulation (MODEL.md §1): a smaller sub-batch needs less memory and keeps the
    global batch.
    """
    for sub in profile.sub_batches(job, min_sub_batch):
        if profile.memory_mb(job, sub) <= room_mb:
            return sub
    return None


def describe_gpus(state: RoundState, gpu_ids: Iterable[int]) -> str:
    """``"GPUs 0,1 on node-00"`` — a compact human-readable placement."""
    by_node: dict[str, list[int]] = {}
    for g in gpu_ids:
        by_node.setdefault(state.gpus[g].node, []).append(g)
    return "; ".join(
        f"GPU{'s' if len(ids) > 1 else ''} {','.join(map(str, ids))} on {node}"
        for node, ids in by_node.items()
    )


def start_on_idle(state: RoundState, job: Job, profile: Profile, min_sub_batch: int) -> Start | str:
    """Start ``job`` exclusively on idle GPUs at the largest sub-batch that any ``G_j`` idle GPUs
    can hold, and record it in ``state``; a job started alone becomes a resident when ``state``
    tracks sharing. Returns the :class:`Start`, or why it must wait.

    The GPUs are those of :meth:`RoundState.pick_idle` (one node if possible, else the fewest
    nodes) unless their memory holds a smaller sub-batch than the ``G_j`` largest idle GPUs
    would (heterogeneous clusters only): then, with ``b`` the largest sub-batch whose
    ``mem_j(b)`` (MB per GPU) fits the ``G_j``-th largest idle GPU, the GPUs are
    :meth:`RoundState.pick_idle_with_memory` ``(G_j, mem_j(b))`` — the same node preference among
    the idle GPUs of at least that memory. An exclusive GPU keeps no reserve (the reserve only
    protects a shared GPU), so the sub-batch fits when ``mem_j(b) ≤`` the smallest GPU's memory.
    The largest sub-batch (fewest accumulation steps) wins over keeping the gang on one node.
    On a cluster whose healthy GPUs all have the same memory the choice is exactly
    :meth:`RoundState.pick_idle`'s.
    """
    gpu_ids = state.pick_idle(job.gpus)
    if gpu_ids is None:
        return f"needs {job.gpus} GPUs, {state.idle_count} idle"
    memory = min(state.gpus[g].memory_mb for g in gpu_ids)
    sub = largest_fitting_sub_batch(profile, job, memory, min_sub_batch)
    # heterogeneous memory: look for better idle GPUs only if the G_j largest healthy GPUs would
    # give a larger sub-batch (no idle set can offer more), so this is O(sub-batches) when not
    if not state.uniform_memory and sub != largest_fitting_sub_batch(
        profile, job, state.memory_desc_mb[job.gpus - 1], min_sub_batch
    ):
        best_memory = state.idle_memory_desc(job.gpus) or memory  # pick_idle found job.gpus idle
        best = (
            sub
            if best_memory <= memory
            else largest_fitting_sub_batch(profile, job, best_memory, min_sub_batch)
        )
        if best is None:
            return (
                f"needs more than the {best_memory} MB per GPU that its {job.gpus} largest idle "
                f"GPUs offer, at every sub-batch (down to {min_sub_batch})"
            )
        if best != sub:
            floor = profile.memory_mb(job, best)
            better = state.pick_idle_with_memory(job.gpus, floor)
            if better is not None:  # always: the job.gpus largest idle GPUs have ≥ floor MB
                gpu_ids, sub = better, best
    if sub is None:
        return f"needs more than the {memory} MB of its GPUs at every sub-batch (down to {min_sub_batch})"
    state.take(gpu_ids)
    state.add_resident(job, sub, gpu_ids)
    return Start(
        job.id, gpu_ids, sub, job.batch_size // sub, (), f"exclusive on idle {describe_gpus(state, gpu_ids)}"
    )


def exclusive_in_order(
    snapshot: Snapshot, profile: Profile, jobs: Iterable[Job], *, blocking: bool, explain: bool
) -> tuple[tuple[Start, ...], tuple[Wait, ...]]:
    """Start ``jobs`` in the given order on idle GPUs, exclusively, without preemption.

    ``blocking=True``: strict order — once a job that could ever fit does not fit now, every later
    job waits too (FIFO's head-of-line blocking). ``blocking=False``: a job that does not fit is
    skipped and later ones may start (backfill). Jobs that can never fit, or that their tenant's
    quota refuses, never block.
    """
    state = RoundState(snapshot)
    profile = cached(profile)
    gate = gate_for(snapshot, can_start=lambda j: never_fits_reason(j, state, profile) is None)
    min_sub = snapshot.config.min_sub_batch
    starts: list[Start] = []
    waits: list[Wait] = []
    blocker: Job | None = None
    for job in jobs:
        reason = never_fits_reason(job, state, profile)
        if reason is None and gate is not None and job.gpus <= state.idle_count:
            reason = gate.refusal(job, state.idle_count - job.gpus)
        if reason is None and blocker is not None:
            reason = f"waits behind job {blocker.id} (strict FIFO: the head of the queue does not fit)"
        elif reason is None:
            outcome = start_on_idle(state, job, profile, min_sub)
            if isinstance(outcome, Start):
                starts.append(outcome)
                if gate is not None:
                    gate.admit(job)
                continue
            reason = outcome
            if blocking:
                blocker = job
        if explain:
            waits.append(Wait(job.id, reason))
        elif blocker is not None or state.idle_count == 0:
            break  # nothing later can start, and no one asked why
    return tuple(starts), tuple(waits)


def preemptive_exclusive(
    snapshot: Snapshot,
    profile: Profile,
    policy: str,
    key: Callable[[Job], tuple],
    *,
    explain: bool,
) -> RoundDecisions:
    """One round of a preemptive, exclusive policy (SRTF, Tiresias).

    All jobs, pending and running, are ranked by ``key`` (smallest first). Walking that ranking,
    each job is admitted while its GPUs fit in the healthy GPUs not yet promised (a running job
    keeps its own GPUs; a pending one needs ``job.gpus``); a job that does not fit is skipped and
    later ones may still be admitted. Running jobs not admitted are preempted; admitted pending
    jobs start on the GPUs left idle once the preempted jobs are gone (preemptions are applied
    before starts, see :class:`RoundDecisions`). Running jobs are never migrated. With quotas, a
    pending job is admitted only if the quota gate allows it (it does not reclaim lent GPUs, so
    borrowing is time-bounded).
    """
    state = RoundState(snapshot)
    profile = cached(profile)
    gate = gate_for(snapshot, can_start=lambda j: never_fits_reason(j, state, profile) is None)
    min_sub = snapshot.config.min_sub_batch
    promised: set[int] = set()
    free = state.healthy_count
    ranked = sorted(
        [(key(rj.job), False, rj) for rj in snapshot.running]
        + [(key(job), True, job) for job in snapshot.pending],
        key=lambda entry: entry[0],
    )
    admitted: list[Job] = []
    preemptions: list[Preempt] = []
    waits: list[Wait] = []
    # for the quota gate: healthy GPUs held by running jobs not yet ranked (not idle for owners)
    later: dict[int, int] = {}
    for rj in snapshot.running:
        for g in rj.placement.gpu_ids:
            if 0 <= g < len(state.gpus) and state.gpus[g].healthy:
                later[g] = later.get(g, 0) + 1
    for rank, (_, is_pending, entry) in enumerate(ranked, start=1):
        if is_pending:
            job = entry
            reason = never_fits_reason(job, state, profile)
            if reason is None and gate is not None and job.gpus <= free:
                reason = gate.refusal(job, free - job.gpus - len(later))
            if reason is None and job.gpus <= free:
                free -= job.gpus
                admitted.append(job)
                if gate is not None:
                    gate.admit(job)
            elif explain:
                waits.append(
                    Wait(
                        job.id,
                        reason
                        or f"rank {rank} under {policy}: needs {job.gpus} GPUs, "
                        f"{free} left after higher-ranked jobs",
                    )
                )
            continue
        healthy = {g for g in entry.placement.gpu_ids if 0 <= g < len(state.gpus) and state.gpus[g].healthy}
        for g in healthy:
            later[g] -= 1
            if later[g] == 0 or g in promised:
                del later[g]
        cost = len(healthy - promised)
        if cost <= free:
            free -= cost
            promised |= healthy
        else:
            state.release(entry.placement.gpu_ids)
            if gate is not None:
                gate.release(entry.job)
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


@dataclass(frozen=True, slots=True)
class SharePlan:
    """A partner finder's answer: start the job at ``sub_batch`` on all idle GPUs plus, from each
    resident of ``partners``, the listed GPU ids; ``shares`` explains each pair."""

    sub_batch: int
    partners: tuple[tuple[Resident, tuple[int, ...]], ...]
    shares: tuple[Share, ...]
    reason: str


class PartnerFinder(ResidentListener, Protocol):
    """How a sharing policy picks the residents a waiting job joins (SJF-FFS, SJF-BSBF)."""

    def find(self, job: Job, need: int) -> SharePlan | str:
        """Partners giving ``job`` ``need`` more GPUs than the idle ones, or why there are none."""
        ...


def sharing_round(
    snapshot: Snapshot,
    profile: Profile,
    policy: str,
    make_finder: Callable[[RoundState, CachedProfile], PartnerFinder],
    *,
    explain: bool,
    order: Sequence[Job] | None = None,
    starving: Callable[[Job], bool] | None = None,
    preemptions: Sequence[Preempt] = (),
    can_preempt: bool = False,
) -> RoundDecisions:
    """One round of a non-preemptive SJF policy with co-location (MODEL.md §3 skeleton).

    Pending jobs in SJF order ``(P_j, submit_time, id)``. For each job: enough idle GPUs → an
    exclusive start on idle GPUs only; otherwise, if idle plus shareable GPUs could hold its gang,
    the policy's ``PartnerFinder`` picks residents to share; else the job waits. A job started alone
    in this round becomes a resident for later jobs of the same round; a resident joined by a job is
    withdrawn, so no GPU ever holds more than two jobs. Once no idle and no shareable GPU is left,
    the remaining jobs wait in O(1) each (no reason objects at all when ``explain`` is False).
    Running jobs are never preempted here.

    Extensions for ``sjf-bsbf-fair`` (docs/FAIRNESS.md), all off by default: ``order`` replaces the
    SJF order; when a job for which ``starving`` is true cannot start (and could ever start, within
    its tenant's cap), it holds a **reservation** — the first such job only (``sjf-bsbf-fair``
    marks just its starving head, placed first in ``order``): every later job of the round waits
    unless it fits its tenant's unused guarantee or can be backfilled — alone on idle GPUs, ending
    (``P_j``) before the reservation's shadow time or on GPUs it will not need then
    (:func:`shadow_time`, EASY backfilling);
    ``preemptions`` (already removed from ``snapshot.running``) are returned with the starts;
    ``can_preempt`` tells the quota gate that lent GPUs are reclaimed by preemption.
    """
    cp = cached(profile)
    state = RoundState(snapshot, cp, track_sharing=True)
    finder = make_finder(state, cp)
    state.listener = finder
    gate: QuotaGate | None = gate_for(
        snapshot, can_preempt=can_preempt, can_start=lambda j: never_fits_reason(j, state, cp) is None
    )
    order = sorted(snapshot.pending, key=sjf_key) if order is None else order
    starts: list[Start] = []
    waits: list[Wait] = []
    blocker: Job | None = None
    reserved = ""
    now = snapshot.now
    # busy healthy GPU → when it is expected to be idle (only needed for a reservation's backfill)
    frees: dict[int, float] = {} if starving is None else expected_free_times(snapshot, cp)
    shadow, spare = math.inf, 0
    for position, job in enumerate(order):
        if blocker is not None and not (gate is not None and gate.within_guarantee(job)):
            # under a reservation only EASY backfill (Lifka 1995): alone on idle GPUs, and either
            # ending (P_j) before the shadow time or on GPUs the reserved job will not need then
            ends_before = now + job.remaining_time_s <= shadow
            reason = never_fits_reason(job, state, cp) or reserved
            if (
                job.gpus <= state.idle_count
                and (ends_before or job.gpus <= spare)
                and never_fits_reason(job, state, cp) is None
                and (gate is None or gate.refusal(job, state.idle_count - job.gpus) is None)
            ):
                outcome = start_on_idle(state, job, cp, state.min_sub_batch)
                if isinstance(outcome, Start):
                    starts.append(outcome)
                    if gate is not None:
                        gate.admit(job)
                    if not ends_before:
                        spare -= job.gpus
                    continue
            if explain:
                waits.append(Wait(job.id, reason))
            elif state.idle_count == 0 and gate is None:
                break
            continue
        if state.idle_count == 0 and state.shareable_count == 0:
            if explain:
                left = reserved or "no idle or shareable GPU left this round"
                waits.extend(Wait(j.id, never_fits_reason(j, state, cp) or left) for j in order[position:])
            break
        reason = never_fits_reason(job, state, cp)
        can_reserve = reason is None and starving is not None and starving(job)
        if reason is None and gate is not None:
            reason = gate.refusal(job, state.idle_count - job.gpus if job.gpus <= state.idle_count else 0)
            can_reserve = can_reserve and not gate.over_cap(job)
        if reason is None:
            if job.gpus <= state.idle_count:
                outcome: Start | SharePlan | str = start_on_idle(state, job, cp, state.min_sub_batch)
            elif job.gpus > state.idle_count + state.shareable_count:
                outcome = (
                    f"needs {job.gpus} GPUs: {state.idle_count} idle and {state.shareable_count} shareable"
                )
            else:
                outcome = finder.find(job, job.gpus - state.idle_count)
                if isinstance(outcome, SharePlan):
                    outcome = _apply_share(state, cp, job, outcome)
            if isinstance(outcome, Start):
                starts.append(outcome)
                if gate is not None:
                    gate.admit(job)
                if starving is not None:
                    for g in outcome.gpu_ids:
                        frees[g] = max(frees.get(g, now), now + job.remaining_time_s)
                continue
            reason = outcome
        if can_reserve and blocker is None:
            blocker = job
            shadow, spare = shadow_time(frees, state.idle_count, job.gpus, now)
            reserved = (
                f"GPUs reserved for starving job {job.id} (waiting past the starvation bound) "
                f"until about t={shadow:.0f} s"
            )
        if explain:
            waits.append(Wait(job.id, reason))
    return RoundDecisions(policy, snapshot.now, tuple(starts), tuple(preemptions), tuple(waits))


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


def _apply_share(state: RoundState, profile: Profile, job: Job, plan: SharePlan) -> Start | str:
    """Record ``plan`` in ``state`` (all idle GPUs + the partners' GPUs) and build its Start."""
    idle = state.pick_idle(state.idle_count) or ()
    if idle and profile.memory_mb(job, plan.sub_batch) > min(state.gpus[g].memory_mb for g in idle):
        return f"its sub-batch {plan.sub_batch} does not fit the memory of the idle GPUs"
    taken = list(idle)
    for resident, gpu_ids in plan.partners:
        state.remove_resident(resident.job.id)
        taken.extend(gpu_ids)
    state.take(taken)
    return Start(
        job.id,
        tuple(sorted(taken)),
        plan.sub_batch,
        job.batch_size // plan.sub_batch,
        plan.shares,
        plan.reason,
    )
