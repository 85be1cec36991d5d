"""Who holds which GPU during one scheduling round, and gang selection on idle GPUs (pure Python).

A :class:`RoundState` is built from a :class:`~scheduling.core.types.Snapshot` at the start of a
policy's ``decide`` and updated as the policy starts (or preempts) jobs within the round, so that a
GPU is never given twice and never holds more than two jobs (MODEL.md §2, "pairs"). Only healthy
GPUs are ever offered. Units: memory in MB, times in s, counts in GPUs.

Gang selection on idle GPUs (MODEL.md §3, "prefer one node, then the fewest nodes"): a gang that
fits on one node goes to the node with the fewest idle GPUs that still holds it (best fit, which
keeps whole nodes free for large gangs); otherwise the nodes with the most idle GPUs are taken
first (the fewest nodes), the last one again chosen by best fit. GPUs are always distinct
(:meth:`RoundState.pick_idle`, :meth:`RoundState.pick_idle_with_memory`).

With ``consolidated=True`` (``SchedulerConfig.placement``, the exclusive baselines only) the
choice follows the peers' ``yarn`` placement instead (Tiresias' and Muri's simulators,
``switch.py``): a gang of at most one node's GPUs goes to the first node, in cluster order, with
enough idle GPUs; a larger one takes the first wholly idle nodes, in cluster order, while at
least a node's worth of GPUs remains, and the rest on the first other node with enough idle GPUs;
otherwise it does not fit, however many GPUs are idle elsewhere (:meth:`RoundState.pick_consolidated`).

For the sharing policies the state also keeps the *residents*: running jobs alone on their GPUs
whose memory leaves room for a partner (:class:`Resident`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, filterfalse, repeat
from operator import attrgetter
from typing import Protocol

from scheduling.core.gpu_types import TypeBook, cluster_types
from scheduling.core.start_reasons import ExclusiveReason
from scheduling.core.types import GPU, Cluster, Job, JobId, Profile, RunningJob, Snapshot

_gpu_ids = attrgetter("placement.gpu_ids")


def healthy_memory_desc(snapshot: Snapshot) -> list[int]:
    """Memory (MB) of the healthy GPUs, largest first."""
    return sorted((g.memory_mb for g in snapshot.cluster.gpus if g.healthy), reverse=True)


@dataclass(frozen=True, slots=True)
class ClusterLayout:
    """What every round needs of a cluster and that no round changes (:func:`cluster_layout`).

    ``node_of``: node ordinal of each GPU id; ``node_names``/``node_sizes``: per node ordinal,
    in cluster order; ``healthy_by_node``: the healthy GPU ids of each node, ascending;
    ``memory_desc_mb``: memory (MB) of the healthy GPUs, largest first; ``type_memory``: each
    GPU type of the healthy GPUs with its largest memory (MB), by type name; ``healthy_ids``: the
    healthy GPU ids.
    """

    node_of: tuple[int, ...]
    node_names: tuple[str, ...]
    node_sizes: tuple[int, ...]
    healthy_by_node: tuple[tuple[int, ...], ...]
    healthy_count: int
    memory_desc_mb: tuple[int, ...]
    type_memory: tuple[tuple[str, int], ...] = ()
    healthy_ids: frozenset[int] = frozenset()

    @classmethod
    def of(cls, cluster: Cluster) -> ClusterLayout:
        """Derive the layout of ``cluster`` (O(GPUs))."""
        node_of: list[int] = []
        names: list[str] = []
        ordinal: dict[str, int] = {}
        for gpu in cluster.gpus:
            if gpu.node not in ordinal:
                ordinal[gpu.node] = len(names)
                names.append(gpu.node)
            node_of.append(ordinal[gpu.node])
        sizes = [0] * len(names)
        healthy: list[list[int]] = [[] for _ in names]
        for gpu in cluster.gpus:
            sizes[node_of[gpu.id]] += 1
            if gpu.healthy:
                healthy[node_of[gpu.id]].append(gpu.id)
        memory = sorted((g.memory_mb for g in cluster.gpus if g.healthy), reverse=True)
        return cls(
            tuple(node_of),
            tuple(names),
            tuple(sizes),
            tuple(tuple(ids) for ids in healthy),
            sum(len(ids) for ids in healthy),
            tuple(memory),
            tuple(sorted(cluster_types(cluster.gpus).items())),
            frozenset(chain.from_iterable(healthy)),
        )


_last_layout: list[tuple[Cluster, ClusterLayout]] = []


def cluster_layout(cluster: Cluster) -> ClusterLayout:
    """:meth:`ClusterLayout.of`, remembered for the last ``Cluster`` object seen (a driver hands
    the same object round after round; a cache, it changes nothing)."""
    last = _last_layout
    if last and last[0][0] is cluster:
        return last[0][1]
    layout = ClusterLayout.of(cluster)
    last[:] = [(cluster, layout)]
    return layout


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

    def __init__(
        self,
        snapshot: Snapshot,
        profile: Profile | None = None,
        *,
        track_sharing: bool = False,
        consolidated: bool = False,
    ):
        self.gpus: tuple[GPU, ...] = snapshot.cluster.gpus
        # the reason of every exclusive start of the round, formatted only when read
        self.exclusive_reason = ExclusiveReason(self.gpus)
        self.consolidated = consolidated
        self.reserve_mb = snapshot.config.memory_reserve_mb
        self.min_sub_batch = snapshot.config.min_sub_batch
        self.can_share = track_sharing and snapshot.config.max_jobs_per_gpu >= 2
        self.share_unknown = snapshot.config.share_unknown
        self.profile = profile
        layout = cluster_layout(snapshot.cluster)
        n = len(self.gpus)
        self.node_of: tuple[int, ...] = layout.node_of
        self.node_names: tuple[str, ...] = layout.node_names
        #: the healthy GPU ids (the cluster's, which no round changes)
        self.healthy_ids: frozenset[int] = layout.healthy_ids
        # jobs per GPU counted at C speed (it runs every round over every running job's GPUs);
        # a healthy GPU is idle iff no running job lists it (healthy ids are within range)
        held = Counter(chain.from_iterable(map(_gpu_ids, snapshot.running)))
        self.load: list[int] = list(map(held.get, range(n), repeat(0, n)))
        self._idle: list[dict[int, None]] = [
            dict.fromkeys(filterfalse(held.__contains__, ids)) for ids in layout.healthy_by_node
        ]
        self.node_sizes: tuple[int, ...] = layout.node_sizes
        self._widest = max(self.node_sizes, default=0)
        self._by_free: list[dict[int, None]] = [{} for _ in range(self._widest + 1)]
        for node, idle in enumerate(self._idle):
            self._by_free[len(idle)][node] = None
        self.idle_count = sum(len(idle) for idle in self._idle)
        self.healthy_count = layout.healthy_count
        self.memory_desc_mb: Sequence[int] = layout.memory_desc_mb
        self.largest_memory_mb = self.memory_desc_mb[0] if self.memory_desc_mb else 0
        # every healthy GPU has the same memory: any idle set fits a job as well as any other, so
        # the choice of idle GPUs needs no memory floor (the fast path of start_on_idle)
        self.uniform_memory = not self.memory_desc_mb or self.memory_desc_mb[0] == self.memory_desc_mb[-1]
        # fit_key(job) → why a job of it can never start on this round's healthy GPUs (None: it can)
        self.unfit_by_key: dict[tuple, str | None] = {}
        self.types = TypeBook(snapshot, dict(layout.type_memory))  # GPU types (scheduling.core.gpu_types)
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
        if self.consolidated:
            return self.pick_consolidated(count, [sorted(idle) for idle in self._idle])
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
        """``count`` distinct idle GPU ids (sorted) each with at least ``floor_mb`` MB of memory:
        :meth:`pick_idle_where` with that predicate."""
        return self.pick_idle_where(count, lambda g: g.memory_mb >= floor_mb)

    def idle_ids(self) -> list[int]:
        """The idle GPU ids, by node then id."""
        return [g for idle in self._idle for g in sorted(idle)]

    def pick_idle_where(self, count: int, ok: Callable[[GPU], bool]) -> tuple[int, ...] | None:
        """``count`` distinct idle GPU ids (sorted) among those for which ``ok`` holds, chosen as
        :meth:`pick_idle` chooses among all idle GPUs: one node if possible (the node with the
        fewest such GPUs that still holds the gang), else the nodes with the most such GPUs first
        and the last one by best fit; ties go to the node listed first in the cluster, and within
        a node the lowest GPU ids are taken. ``None`` when fewer than ``count`` idle GPUs qualify.
        Does not take them. O(idle GPUs + nodes · log nodes)."""
        if count < 1 or count > self.idle_count:
            return None
        gpus = self.gpus
        eligible: list[tuple[int, int, list[int]]] = []  # (number of GPUs, node ordinal, sorted ids)
        total = 0
        for node, idle in enumerate(self._idle):
            ids = sorted(g for g in idle if ok(gpus[g]))
            if ids:
                eligible.append((len(ids), node, ids))
                total += len(ids)
        if total < count:
            return None
        if self.consolidated:
            by_node: list[list[int]] = [[] for _ in self._idle]
            for _, node, ids in eligible:
                by_node[node] = ids
            return self.pick_consolidated(count, by_node)
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

    def pick_consolidated(self, count: int, free: list[list[int]]) -> tuple[int, ...] | None:
        """``count`` GPU ids (sorted) from ``free`` (node ordinal → its usable GPU ids, sorted) by
        the peers' ``yarn`` rule (module docstring), or ``None`` when the rule finds no room.

        A gang of at most the widest node's GPUs: the first node with ``count`` usable GPUs,
        its lowest ids. A larger gang: the first nodes whose GPUs are all usable while at least
        a node's worth remains, then the rest on the first other node with enough usable GPUs.
        O(nodes)."""
        if count <= self._widest:
            for ids in free:
                if len(ids) >= count:
                    return tuple(ids[:count])
            return None
        picked: list[int] = []
        whole: set[int] = set()
        remaining = count
        for node, ids in enumerate(free):
            size = self.node_sizes[node]
            if remaining < size:
                continue
            if len(ids) == size:
                picked.extend(ids)
                whole.add(node)
                remaining -= size
        if remaining > 0:
            rest = next(
                (ids for node, ids in enumerate(free) if node not in whole and len(ids) >= remaining), None
            )
            if rest is None:
                return None
            picked.extend(rest[:remaining])
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
        load, idle, node_of = self.load, self._idle, self.node_of
        for g in gpu_ids:
            load[g] += 1
            if g in idle[node_of[g]]:  # a partner's GPU is not idle: nothing else changes
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
        gpus = self.gpus
        return min([gpus[g].memory_mb for g in gpu_ids]) - used_mb - self.reserve_mb

    def _add_running_resident(self, rj: RunningJob) -> None:
        gpu_ids = rj.placement.gpu_ids
        gpus, load, n = self.gpus, self.load, len(self.gpus)
        for g in gpu_ids:
            if not (0 <= g < n) or load[g] != 1:
                return  # shares a GPU (or a GPU unknown to this cluster): not alone
        candidates = tuple(sorted([g for g in gpu_ids if gpus[g].healthy]))
        if candidates:
            self.add_resident(rj.job, rj.placement.sub_batch, candidates)

    def may_share(self, job: Job) -> str | None:
        """``None`` if ``job`` may share a GPU this round, else why not: it said ``sharing: never``,
        or its memory is unknown (unless ``SchedulerConfig.share_unknown``; docs/LEARNING.md §3)."""
        if not job.sharing_allowed:
            return "it never shares a GPU (sharing: never)"
        assert self.profile is not None
        if not self.share_unknown and not self.profile.memory_known(job):
            return "its memory is unknown: it runs alone until its memory is measured"
        return None

    def add_resident(self, job: Job, sub_batch: int, gpu_ids: tuple[int, ...]) -> Resident | None:
        """Offer ``job`` (alone on ``gpu_ids`` at ``sub_batch``) as a sharing partner, if it may
        share (:meth:`may_share`) and its memory leaves room; returns the :class:`Resident` or
        ``None``."""
        if not self.can_share or not gpu_ids or self.may_share(job) is not None:
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
