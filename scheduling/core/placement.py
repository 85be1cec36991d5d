"""Where a job can go: fit checks and exclusive starts on idle GPUs (pure Python).

A job *can never start* on a cluster when its gang is larger than the healthy GPUs, or when its
memory per GPU at its smallest allowed sub-batch exceeds its ``G_j``-th largest healthy GPU
(:func:`unfit_reason`); such a job waits with that reason and never blocks others. Gradient
accumulation (MODEL.md §1) lets a job run a smaller sub-batch when memory is short
(:func:`largest_fitting_sub_batch`).

An exclusive start (:func:`start_on_idle`) takes the idle GPUs that
:class:`~scheduling.core.round_state.RoundState` picks (one node if possible, else the fewest
nodes). On a cluster whose GPUs differ in memory, a start that those GPUs would hold only at a
smaller sub-batch (or not at all) than the job's ``G_j`` largest idle GPUs makes the same choice
among the idle GPUs with enough memory for that larger sub-batch. Units: memory in MB, counts in GPUs.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from scheduling.core.gpu_types import accepts, memory_desc_of, pick_smallest_sufficient
from scheduling.core.profile_cache import CachedProfile, fit_key
from scheduling.core.round_state import RoundState, healthy_memory_desc
from scheduling.core.types import Job, Profile, Snapshot, Start


def unfit_reason(job: Job, memory_desc_mb: Sequence[int], profile: Profile, min_sub_batch: int) -> str | None:
    """Why ``job`` can never start on healthy GPUs of these memories (MB, largest first), or
    ``None`` if it can: a gang of no GPU, a gang larger than the healthy GPUs, or memory per GPU
    above its ``G_j``-th largest healthy GPU at every sub-batch down to ``min_sub_batch`` (a gang
    runs one sub-batch on ``G_j`` GPUs, so its smallest GPU must hold it)."""
    if job.gpus < 1:
        return f"asks for {job.gpus} GPUs; a job needs at least one"
    if job.gpus > len(memory_desc_mb):
        healthy = len(memory_desc_mb)
        return (
            f"needs {job.gpus} GPU{'' if job.gpus == 1 else 's'} but the cluster has only {healthy} healthy "
            f"GPU{'' if healthy == 1 else 's'}: it cannot start until more GPUs are healthy"
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
    by_types: dict[tuple[str, ...], list[int]] = {(): memory_desc}

    def can_start(job: Job) -> bool:
        shape = (CachedProfile.shape(job), job.gpu_types)
        answer = fits.get(shape)
        if answer is None:
            memory = by_types.get(job.gpu_types)
            if memory is None:
                memory = by_types[job.gpu_types] = memory_desc_of(
                    snapshot.cluster.gpus, lambda g: accepts(job, g)
                )
            answer = fits[shape] = unfit_reason(job, memory, profile, min_sub) is None
        return answer

    return can_start


_UNKNOWN = object()  # never_fits_reason's cache miss (None is an answer: the job can start)


def never_fits_reason(job: Job, state: RoundState, profile: Profile) -> str | None:
    """:func:`unfit_reason` on the round's healthy GPUs (of the job's GPU types), cached per
    :func:`~scheduling.core.profile_cache.fit_key` for the round: the answer, reason text
    included, depends on nothing else, and the healthy GPUs do not change within a round. Such a
    job waits with this reason and never blocks others."""
    key = fit_key(job)
    cache = state.unfit_by_key
    known = cache.get(key, _UNKNOWN)  # one lookup (a tuple's hash is not cached)
    if known is not _UNKNOWN:
        return known  # type: ignore[return-value]
    memory = state.memory_desc_mb if not job.gpu_types else state.types.memory_desc(job.gpu_types)
    if job.gpu_types and not memory:
        reason: str | None = (
            f"accepts GPU types {', '.join(job.gpu_types)}; the cluster has no healthy GPU of them"
        )
    else:
        reason = unfit_reason(job, memory, profile, state.min_sub_batch)
    cache[key] = reason
    return reason


def largest_fitting_sub_batch(profile: Profile, job: Job, room_mb: float, min_sub_batch: int) -> int | None:
    """The largest sub-batch of ``job`` whose memory per GPU is ≤ ``room_mb`` (MB), or ``None``.

    Gradient accumulation (MODEL.md §1): a smaller sub-batch needs less memory and keeps the
    global batch.
    """
    for sub in profile.sub_batches(job, min_sub_batch):
        if profile.memory_mb(job, sub) <= room_mb:
            return sub
    return None


def start_on_idle(
    state: RoundState, job: Job, profile: Profile, min_sub_batch: int, *, avoid_reserved: bool = False
) -> Start | str:
    """Start ``job`` exclusively on idle GPUs at the largest sub-batch that any ``G_j`` idle GPUs
    can hold, and record it in ``state``; a job started alone becomes a resident when ``state``
    tracks sharing. Returns the :class:`Start`, or why it must wait.

    On a cluster of several GPU types, or with per-type quotas, :func:`start_on_typed` decides
    (``avoid_reserved``: not on the types reserved for a starving head). Otherwise:

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
    book = state.types
    if not book.single:
        return start_on_typed(state, job, profile, min_sub_batch, avoid_reserved=avoid_reserved)
    if job.gpu_types and not book.allowed(job):
        return f"accepts GPU types {', '.join(job.gpu_types)}; the cluster has {', '.join(book.types)}"
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
    return Start(job.id, gpu_ids, sub, job.batch_size // sub, (), state.exclusive_reason)


def start_on_typed(
    state: RoundState, job: Job, profile: Profile, min_sub_batch: int, *, avoid_reserved: bool = False
) -> Start | str:
    """:func:`start_on_idle` on a cluster of several GPU types (or with per-type quotas): only idle
    GPUs of the types the job may use (:meth:`~scheduling.core.gpu_types.TypeBook.allowed`); the
    sub-batch is the largest that the ``G_j`` largest of them hold, and with ``mem_j`` of it as the
    floor the GPUs are the smallest sufficient ones
    (:func:`~scheduling.core.gpu_types.pick_smallest_sufficient`, node preference of
    :meth:`RoundState.pick_idle_where` within the tiers taken). Returns the Start or why not."""
    book = state.types
    allowed = book.allowed(job, avoid_reserved=avoid_reserved)
    if not allowed:
        refusal = book.refusal(job)
        if refusal is not None:
            return refusal
        if avoid_reserved:
            return "the GPU types it accepts are reserved for a starving job"
        return f"accepts GPU types {', '.join(job.gpu_types)}; the cluster has {', '.join(book.types)}"
    gpus = state.gpus
    ids = [g for g in state.idle_ids() if gpus[g].gpu_type in allowed]
    kinds = ", ".join(sorted(allowed))
    if len(ids) < job.gpus:
        return f"needs {job.gpus} GPUs of type {kinds}, {len(ids)} idle{book.capped_note(job)}"
    best_memory = heapq.nlargest(job.gpus, (gpus[g].memory_mb for g in ids))[-1]
    sub = largest_fitting_sub_batch(profile, job, best_memory, min_sub_batch)
    if sub is None:
        return (
            f"needs more than the {best_memory} MB per GPU that its {job.gpus} largest idle GPUs of "
            f"type {kinds} offer, at every sub-batch (down to {min_sub_batch}){book.capped_note(job)}"
        )
    floor = profile.memory_mb(job, sub)
    gpu_ids = pick_smallest_sufficient(
        gpus, ids, job.gpus, floor, lambda ok: state.pick_idle_where(job.gpus, ok)
    )
    if gpu_ids is None:  # never: the G_j largest of ids hold ``floor`` MB
        return f"needs {job.gpus} GPUs of type {kinds} with {floor:.0f} MB, too few idle"
    state.take(gpu_ids)
    state.add_resident(job, sub, gpu_ids)
    book.record(job, gpu_ids)
    return Start(job.id, gpu_ids, sub, job.batch_size // sub, (), state.exclusive_reason)
