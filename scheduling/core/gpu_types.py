"""GPU types: which GPUs a job accepts, per-type quota caps, smallest-sufficient placement
(pure Python; docs/FAIRNESS.md §GPU types, **ours** — the SJF-BSBF paper has one GPU type).

- A job accepts the types in :attr:`~scheduling.core.types.Job.gpu_types` (empty: any type).
- **Per-type quotas** (:attr:`~scheduling.core.types.Snapshot.type_quotas`, tenant → type →
  :class:`~scheduling.core.types.TenantQuota`): the GPUs of type ``T`` a tenant's running jobs
  hold, ``u_{t,T}``, count against its ``T`` quota: a start that would give it
  ``u_{t,T} + G_j > g_{t,T} + b_{t,T}`` GPUs of type ``T`` may not use type ``T``. The tenant's
  quota without a type (``Snapshot.tenant_quotas``, the *any* quota) still governs its total over
  all types (:mod:`scheduling.core.quota`). A type without a quota row for the tenant is bounded
  by the *any* quota only.
- **Smallest sufficient GPUs** (:func:`pick_smallest_sufficient`): among the idle GPUs a job may
  use, the largest sub-batch that any ``G_j`` of them hold sets a memory floor; the GPUs are then
  taken from the smallest tier ``(memory MB, type)`` upward, so scarce large GPUs stay idle for the
  jobs that need them.
- **Per-type reservation**: a starving head reserves only the types it may use
  (:meth:`TypeBook.reserve`); other jobs may still start alone on idle GPUs of other types.

On a cluster with one GPU type and one memory size, and no job restricting types and no per-type
quota, nothing here changes any decision (:attr:`TypeBook.trivial`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from common.shapes import node_names
from scheduling.core.types import GPU, Cluster, Job, Snapshot, TenantQuota


def cluster_of_groups(groups: Iterable[tuple[int, int, str, int]]) -> Cluster:
    """A cluster of node groups ``(nodes, GPUs per node, GPU type, memory MB)``, in order; nodes
    are named ``node-00``, ``node-01``… across the groups (:func:`common.shapes.node_names`), GPU
    ids dense in node order. Raises ``ValueError`` for a group of no node, no GPU or no memory."""
    rows = list(groups)
    for nodes, per_node, _, memory in rows:
        if nodes < 1 or per_node < 1 or memory < 1:
            raise ValueError(
                f"a node group needs ≥ 1 node, GPU and MB, got {nodes}x{per_node} of {memory} MB"
            )
    names = iter(node_names(sum(r[0] for r in rows)))
    gpus: list[GPU] = []
    for nodes, per_node, kind, memory in rows:
        for _ in range(nodes):
            name = next(names)
            gpus.extend(GPU(len(gpus), name, i, memory, kind) for i in range(per_node))
    return Cluster(tuple(gpus))


def accepts(job: Job, gpu: GPU) -> bool:
    """Whether ``job`` may run on ``gpu`` by type (``job.gpu_types`` empty: any type)."""
    return not job.gpu_types or gpu.gpu_type in job.gpu_types


def cluster_types(gpus: Iterable[GPU]) -> dict[str, int]:
    """GPU type → its largest memory (MB) among the healthy ``gpus``."""
    out: dict[str, int] = {}
    for g in gpus:
        if g.healthy:
            out[g.gpu_type] = max(out.get(g.gpu_type, 0), g.memory_mb)
    return out


def usage_by_tenant_type(snapshot: Snapshot) -> dict[tuple[str, str], int]:
    """(tenant, GPU type) → GPUs of that type held by the tenant's running jobs (GPU ids outside
    the cluster are ignored; a GPU shared by two jobs counts for both, as the tenant quota does)."""
    gpus = snapshot.cluster.gpus
    usage: dict[tuple[str, str], int] = {}
    for rj in snapshot.running:
        for g in rj.placement.gpu_ids:
            if 0 <= g < len(gpus):
                key = (rj.job.tenant, gpus[g].gpu_type)
                usage[key] = usage.get(key, 0) + 1
    return usage


class _HasTypes(Protocol):
    gpus: tuple[GPU, ...]
    types: TypeBook


class TypeBook:
    """Per-round GPU-type bookkeeping (mutable, private to one ``decide`` call): the types of the
    cluster, each tenant's GPUs per type against its per-type quotas, and the types reserved for a
    starving head. Built by :class:`~scheduling.core.round_state.RoundState`; ``types``: the
    cluster's :func:`cluster_types` (default: computed from the snapshot)."""

    def __init__(self, snapshot: Snapshot, types: Mapping[str, int] | None = None) -> None:
        self.gpus = snapshot.cluster.gpus
        self.types = dict(cluster_types(self.gpus) if types is None else types)
        self.quotas: Mapping[str, Mapping[str, TenantQuota]] = snapshot.type_quotas
        self.usage = usage_by_tenant_type(snapshot) if self.quotas else {}
        self.reserved: frozenset[str] = frozenset()
        #: at most one healthy type and no per-type quota: placement as without types
        self.single = len(self.types) <= 1 and not self.quotas
        self._memory: dict[tuple[str, ...], list[int]] = {}

    def memory_desc(self, gpu_types: tuple[str, ...]) -> list[int]:
        """Memory (MB) of the healthy GPUs of ``gpu_types`` (empty: all), largest first; cached."""
        memory = self._memory.get(gpu_types)
        if memory is None:
            memory = self._memory[gpu_types] = memory_desc_of(
                self.gpus, lambda g: not gpu_types or g.gpu_type in gpu_types
            )
        return memory

    def over_type_cap(self, job: Job, gpu_type: str) -> bool:
        """Whether ``G_j`` more GPUs of ``gpu_type`` would take the tenant above its quota cap for
        that type (``False`` when it has no quota for the type)."""
        quota = self.quotas.get(job.tenant, {}).get(gpu_type)
        return quota is not None and self.usage.get((job.tenant, gpu_type), 0) + job.gpus > quota.cap

    def allowed(self, job: Job, *, avoid_reserved: bool = False) -> frozenset[str]:
        """The cluster's types ``job`` may use now: accepted by it, within its tenant's per-type
        quota caps, and (``avoid_reserved``) not reserved for a starving head."""
        types = (t for t in self.types if not job.gpu_types or t in job.gpu_types)
        return frozenset(
            t for t in types if not self.over_type_cap(job, t) and not (avoid_reserved and t in self.reserved)
        )

    def refusal(self, job: Job) -> str | None:
        """Why ``job`` may use none of the types it accepts under its tenant's per-type quotas,
        or ``None``."""
        accepted = [t for t in sorted(self.types) if not job.gpu_types or t in job.gpu_types]
        if not accepted or any(not self.over_type_cap(job, t) for t in accepted):
            return None
        caps = ", ".join(f"{t} {self.quotas[job.tenant][t].cap:.0f}" for t in accepted)
        return f"tenant {job.tenant} would exceed its per-type quota caps on every type it accepts ({caps})"

    def capped_note(self, job: Job) -> str:
        """``""``, or a clause naming the accepted types that the tenant's per-type quota caps keep
        ``job`` off now (appended to a wait reason)."""
        capped = [
            t
            for t in sorted(self.types)
            if (not job.gpu_types or t in job.gpu_types) and self.over_type_cap(job, t)
        ]
        if not capped:
            return ""
        caps = ", ".join(f"{t} {self.quotas[job.tenant][t].cap:.0f}" for t in capped)
        return f"; tenant {job.tenant}'s per-type quota caps keep it off {caps}"

    def restricts(self, job: Job) -> bool:
        """Whether ``job`` may not use every GPU type of the cluster now (type request or per-type
        quota): it then runs alone, on GPUs of its allowed types only."""
        return len(self.allowed(job)) < len(self.types)

    def record(self, job: Job, gpu_ids: Iterable[int]) -> None:
        """Count ``gpu_ids`` (started or joined by ``job``) against its tenant's per-type usage."""
        if self.quotas:
            for g in gpu_ids:
                key = (job.tenant, self.gpus[g].gpu_type)
                self.usage[key] = self.usage.get(key, 0) + 1

    def reserve(self, job: Job) -> None:
        """Reserve the types ``job`` (a starving head) may use for the rest of the round."""
        self.reserved = self.allowed(job)

    def partial_reservation(self) -> bool:
        """Whether a reservation leaves some type of the cluster free for other jobs."""
        return bool(self.reserved) and len(self.reserved) < len(self.types)


def reserved_gpu_ids(state: _HasTypes) -> set[int]:
    """Ids of the healthy GPUs of the types reserved in ``state.types`` (a round's state)."""
    kinds = state.types.reserved
    return {g.id for g in state.gpus if g.healthy and g.gpu_type in kinds}


def memory_desc_of(gpus: Iterable[GPU], ok: Callable[[GPU], bool]) -> list[int]:
    """Memory (MB) of the healthy GPUs for which ``ok`` holds, largest first."""
    return sorted((g.memory_mb for g in gpus if g.healthy and ok(g)), reverse=True)


def tiers_upward(gpus: Iterable[GPU], ids: Iterable[int], floor_mb: float) -> list[tuple[int, str]]:
    """The distinct ``(memory MB, type)`` of the GPUs ``ids`` with at least ``floor_mb`` MB,
    smallest first (ties of memory: type name) — the order :func:`pick_smallest_sufficient` fills."""
    table = tuple(gpus)
    return sorted({(table[g].memory_mb, table[g].gpu_type) for g in ids if table[g].memory_mb >= floor_mb})


def pick_smallest_sufficient(
    gpus: tuple[GPU, ...],
    idle_ids: Iterable[int],
    count: int,
    floor_mb: float,
    pick: Callable[[Callable[[GPU], bool]], tuple[int, ...] | None],
) -> tuple[int, ...] | None:
    """``count`` idle GPUs of at least ``floor_mb`` MB each from the smallest tiers
    (:func:`tiers_upward`): the first tier ``k`` such that the idle GPUs of tiers ``≤ k`` number at
    least ``count``; among those, ``pick`` (a node-aware chooser given a GPU predicate, e.g.
    :meth:`~scheduling.core.round_state.RoundState.pick_idle_where`) chooses. ``idle_ids``: the idle
    GPUs the job may use. ``None`` when fewer than ``count`` of them have ``floor_mb`` MB."""
    ids = list(idle_ids)
    tiers = tiers_upward(gpus, ids, floor_mb)
    counts: dict[tuple[int, str], int] = {}
    for g in ids:
        key = (gpus[g].memory_mb, gpus[g].gpu_type)
        counts[key] = counts.get(key, 0) + 1
    total, last = 0, None
    for tier in tiers:
        total += counts[tier]
        if total >= count:
            last = tier
            break
    if last is None:
        return None
    allowed = {t for t in tiers if t <= last}

    def in_tiers(g: GPU) -> bool:
        return (g.memory_mb, g.gpu_type) in allowed

    return pick(in_tiers)


class TypeCapacity:
    """Healthy GPUs of each type not yet promised, for the GPU counting of the preemptive
    baselines (:func:`scheduling.core.preemptive.preemptive_exclusive`) on a cluster of several
    types: a job is admitted only if all admitted jobs can still be given GPUs of types they may
    use, so no running job is preempted for a job that then cannot start on the GPUs freed.

    Feasibility is exact for gangs that may mix their allowed types (supply and demand, Gale
    1957 / Hall's condition): for every set ``S`` of types, the GPUs of the admitted pending
    jobs whose allowed types all lie in ``S`` fit the unpromised GPUs of ``S``. Kept
    incrementally per set: O(2^types) per call."""

    def __init__(self, gpus: Iterable[GPU], book: TypeBook) -> None:
        table = tuple(gpus)
        self.bit = {t: 1 << i for i, t in enumerate(sorted(book.types))}
        self.kind = {g.id: g.gpu_type for g in table}
        sets = 1 << len(self.bit)
        self.cap = [0] * sets  # unpromised GPUs of the types in each set
        self.need = [0] * sets  # GPUs of admitted pending jobs whose types lie in each set
        for g in table:
            if g.healthy and g.gpu_type in self.bit:
                self._add(self.cap, self.bit[g.gpu_type], 1)

    def _add(self, table: list[int], mask: int, n: int, *, superset: bool = True) -> None:
        for s in range(len(table)):
            if s & mask == mask if superset else s & mask:
                table[s] += n

    def _ok(self) -> bool:
        return all(need <= cap for need, cap in zip(self.need, self.cap, strict=True))

    def admit(self, job: Job, allowed: Iterable[str]) -> bool:
        """Admit ``job`` (``G_j`` GPUs of the ``allowed`` types) if every admitted job still fits;
        whether it did (nothing changes otherwise)."""
        mask = 0
        for t in allowed:
            mask |= self.bit.get(t, 0)
        if mask == 0:
            return False
        self._add(self.need, mask, job.gpus)  # sets containing all its types
        if self._ok():
            return True
        self._add(self.need, mask, -job.gpus)
        return False

    def keep(self, gpu_ids: Iterable[int]) -> bool:
        """Promise a running job the ``gpu_ids`` it holds (not yet promised) if every admitted job
        still fits; whether it did (nothing changes otherwise)."""
        taken: list[int] = [self.bit[self.kind[g]] for g in gpu_ids if self.kind.get(g) in self.bit]
        for b in taken:
            self._add(self.cap, b, -1, superset=False)  # sets holding the GPU's type
        if self._ok():
            return True
        for b in taken:
            self._add(self.cap, b, 1, superset=False)
        return False
