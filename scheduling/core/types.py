"""Immutable data that every scheduling policy sees and returns.

This module is the contract between the two drivers of a policy (the trace-driven simulator in
``scheduling.sim`` and the live service in ``scheduling.service``) and the policies in
``scheduling.core.policies``. It is pure Python: no Django, no I/O, no clock, no randomness.

Units everywhere: time in seconds (s), memory in megabytes (MB), GPU counts in GPUs, progress in
training iterations. Model: Luo et al., "Scheduling Deep Learning Jobs in Multi-Tenant GPU
Clusters via Wise Resource Sharing", IWQoS 2024, §1 of ``docs/MODEL.md`` (shared docs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Protocol

from common.shapes import gpu_label, node_names

JobId = int


@dataclass(frozen=True, slots=True)
class GPU:
    """One physical GPU.

    ``id`` is the cluster-wide index (0 … N−1, dense, unique); ``node`` the node's name;
    ``index`` the GPU's index on its node; ``memory_mb`` its memory (MB).
    """

    id: int
    node: str
    index: int
    memory_mb: int
    gpu_type: str = "v100"
    healthy: bool = True

    @property
    def label(self) -> str:
        """``"node-02:3"`` (:func:`common.shapes.gpu_label`): how reasons and the dashboard name it."""
        return gpu_label(self.node, self.index)


@dataclass(frozen=True, slots=True)
class Cluster:
    """The GPUs of a cluster, ordered by node then index (``gpus[i].id == i``).

    Raises ``ValueError`` from :meth:`uniform` for a shape with no GPU or no memory.
    """

    gpus: tuple[GPU, ...]

    @classmethod
    def uniform(
        cls, nodes: int, gpus_per_node: int, memory_mb: int = 49_140, gpu_type: str = "v100"
    ) -> Cluster:
        """``nodes`` × ``gpus_per_node`` identical GPUs; nodes are named ``node-00``, ``node-01``…
        (:func:`common.shapes.node_names`, the names of a live cluster of the same shape)."""
        if nodes < 1 or gpus_per_node < 1:
            raise ValueError(
                f"a cluster needs at least one node and one GPU per node, got {nodes}x{gpus_per_node}"
            )
        if memory_mb < 1:
            raise ValueError(f"GPU memory must be a positive number of MB, got {memory_mb}")
        return cls(
            tuple(
                GPU(n * gpus_per_node + i, name, i, memory_mb, gpu_type)
                for n, name in enumerate(node_names(nodes))
                for i in range(gpus_per_node)
            )
        )

    @property
    def size(self) -> int:
        """Number of GPUs (healthy or not)."""
        return len(self.gpus)

    @property
    def healthy_gpus(self) -> int:
        """Number of healthy GPUs: the largest gang the cluster can ever hold."""
        return sum(1 for g in self.gpus if g.healthy)


@dataclass(frozen=True, slots=True)
class Job:
    """A training job: a gang of ``gpus`` GPUs training ``model`` with global batch ``batch_size``.

    - ``iter_time_s``: exclusive time of one iteration at the full global batch, ``t_j(B_j)`` (s),
      on the job's ``gpus`` GPUs.
    - ``memory_mb``: memory per GPU at the full global batch (MB); ``None`` → from the profile.
    - ``iterations_done``: progress so far (may be fractional in the simulator).
    - ``attained_gpu_s``: GPU-seconds of service received so far (Tiresias' LAS key).
    - ``queued_since``: when the job last entered the queue (submit or preemption), s.
    - ``sharing_allowed``: False for a job (or a tenant's default) that said ``sharing: never``:
      it never shares a GPU, as incoming job or as resident.
    - ``gpu_types``: the GPU types the job accepts (empty: any type; :mod:`scheduling.core.gpu_types`).
    ``P_j`` = :attr:`remaining_time_s` is the SJF key (MODEL.md §1).
    """

    id: JobId
    tenant: str
    model: str
    batch_size: int
    gpus: int
    iterations: int
    submit_time: float
    iter_time_s: float
    memory_mb: float | None = None
    iterations_done: float = 0.0
    attained_gpu_s: float = 0.0
    queued_since: float | None = None
    priority: int = 0
    sharing_allowed: bool = True
    gpu_types: tuple[str, ...] = ()

    @property
    def remaining_iterations(self) -> float:
        """``R_j`` (iterations), never negative."""
        left = self.iterations - self.iterations_done
        return left if left > 0.0 else 0.0  # max(0.0, left), without the call (SJF's key, every job)

    @property
    def remaining_time_s(self) -> float:
        """``P_j = R_j · t_j(B_j)``: remaining exclusive time at the full batch (s)."""
        left = self.iterations - self.iterations_done  # R_j as in remaining_iterations, inlined
        return (left if left > 0.0 else 0.0) * self.iter_time_s

    @property
    def waiting_since(self) -> float:
        """When the current wait began (s): ``queued_since`` or the submit time."""
        return self.submit_time if self.queued_since is None else self.queued_since


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a running job runs: distinct GPU ids, the sub-batch it uses, when it started (s).

    ``accum_steps = batch_size // sub_batch`` micro-steps make one iteration (gradient
    accumulation keeps the global batch).
    """

    job_id: JobId
    gpu_ids: tuple[int, ...]
    sub_batch: int
    start_time: float


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job and its current placement."""

    job: Job
    placement: Placement


TIRESIAS_SERVICE_UNITS: tuple[str, ...] = ("gpu_s", "wall_s")
"""Values of :attr:`TiresiasConfig.service`: attained GPU-seconds, or executed (wall) seconds."""

TIRESIAS_DEMOTED: tuple[str, ...] = ("ahead", "back")
"""Values of :attr:`TiresiasConfig.demoted` (where a job demoted to a lower queue goes)."""

PLACEMENTS: tuple[str, ...] = ("spread", "consolidated")
"""Values of :attr:`SchedulerConfig.placement`."""


@dataclass(frozen=True, slots=True)
class TiresiasConfig:
    """Knobs of the Tiresias baseline (``scheduling.core.policies.tiresias``; Gu et al., NSDI'19).

    - ``thresholds``: service at which a job moves down one queue, strictly increasing; ``n``
      thresholds make ``n + 1`` queues (ours: one threshold of 3,200 GPU-s, two queues).
    - ``service``: what the thresholds measure: ``"gpu_s"`` (attained GPU-seconds, GPUs × wall
      time held) or ``"wall_s"`` (executed wall time, s).
    - ``starvation_guard``/``starvation_factor``: a pending job of a lower queue that has waited
      longer than ``factor ×`` its executed time is promoted to the highest queue.
    - ``demoted``: where a demoted job goes: ``"ahead"`` (ours; it keeps running before the
      lower queue's pending jobs, and the ranking is a pure function of the snapshot) or
      ``"back"`` (Tiresias' and Muri's simulators: to the back of the lower queue's list, the
      queue lists and their guard's bookkeeping kept by the policy between rounds).

    Raises ``ValueError`` for thresholds that are not positive, finite and increasing, a factor
    that is not a positive finite number, or an unknown unit or demotion mode.
    """

    thresholds: tuple[float, ...] = (3_200.0,)
    service: str = "gpu_s"
    starvation_guard: bool = True
    starvation_factor: float = 1.0
    demoted: str = "ahead"

    def __post_init__(self) -> None:
        values = tuple(float(t) for t in self.thresholds)
        if any(not (math.isfinite(t) and t > 0) for t in values) or any(
            b <= a for a, b in zip(values, values[1:], strict=False)
        ):
            raise ValueError(f"Tiresias thresholds must be positive, finite and increasing, got {values}")
        object.__setattr__(self, "thresholds", values)
        if self.service not in TIRESIAS_SERVICE_UNITS:
            raise ValueError(
                f"Tiresias service must be one of {', '.join(TIRESIAS_SERVICE_UNITS)}, got {self.service!r}"
            )
        if not (isinstance(self.starvation_factor, int | float) and math.isfinite(self.starvation_factor)):
            raise ValueError(f"starvation factor must be a finite number, got {self.starvation_factor!r}")
        if self.starvation_factor <= 0:
            raise ValueError(f"starvation factor must be > 0, got {self.starvation_factor}")
        if self.demoted not in TIRESIAS_DEMOTED:
            raise ValueError(f"demoted must be one of {', '.join(TIRESIAS_DEMOTED)}, got {self.demoted!r}")


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Knobs shared by all policies.

    - ``memory_reserve_mb``: memory kept free on every shared GPU (MB) **(ours)**.
    - ``min_sub_batch``: smallest sub-batch size SJF-BSBF tries (MODEL.md §2 "down to a floor").
    - ``max_jobs_per_gpu``: 2, the paper's pairs.
    - ``share_unknown``: let a job of unknown memory, or a pair whose slowdown nobody measured or
      can predict, share anyway (off: they run alone until something is measured;
      docs/LEARNING.md §3).

    Multi-tenancy **(ours, docs/FAIRNESS.md)**; read by the quota filter of every policy and by
    ``sjf-bsbf-fair``; without quotas in the snapshot only the starvation settings matter, and
    only to ``sjf-bsbf-fair``:

    - ``starvation_bound_s``: a pending job that has waited this long (s) is *starving*; the one
      waiting longest goes first and, if it cannot start, holds the round's reservation that no
      other job may take (``sjf-bsbf-fair``, EASY backfilling around it).
    - ``aging_s``: aging time constant (s): ``sjf-bsbf-fair`` orders by ``P_j / (1 + wait/aging_s)``.
    - ``reclaim``: how an owner gets back GPUs lent to other tenants: ``"preempt"`` (borrowed work
      is preempted, checkpoint/restart), ``"bound"`` (a job may borrow only if ``P_j`` ≤
      ``borrow_bound_s``), or ``"both"``. Non-preemptive policies always apply the bound.
    - ``borrow_bound_s``: the bound (s) on the remaining exclusive time of a borrowing job.
    - ``split_charge`` (``sjf-bsbf-fair``, default on): quota use counts a shared GPU by the
      normalised split (:mod:`scheduling.core.charge`) instead of once per job. Off: whole gangs,
      and with it ``colocation_guard`` and ``reclaim_colocated`` do nothing (they need the split).
    - ``colocation_guard`` (``sjf-bsbf-fair``, default on): a start may not co-locate onto another
      tenant's GPUs if that takes that tenant below its guarantee while it has jobs waiting.
    - ``reclaim_colocated`` (``sjf-bsbf-fair``, default on): reclaim also preempts other tenants'
      jobs co-located on the GPUs of a tenant below its guarantee with jobs waiting.
    - ``priority_preemption`` (``sjf-bsbf-fair``, default on): a waiting job of higher priority
      may preempt lower-priority borrowed work (docs/PRIORITY.md).

    Baselines (docs/FIDELITY.md):

    - ``placement``: where the exclusive baselines (FIFO, SJF, SRTF, Tiresias) put a gang on idle
      GPUs: ``"spread"`` (ours: one node if possible, else the fewest nodes, so a gang never waits
      for fragmentation) or ``"consolidated"`` (the peers' ``yarn`` placement: a gang of at most
      one node's GPUs on one node, a larger one on whole idle nodes plus one node for the rest; it
      waits when no such GPUs are idle). The sharing policies always spread.
    - ``tiresias``: :class:`TiresiasConfig`.

    Raises ``ValueError`` for a non-positive or non-finite time, an unknown reclaim mode or
    placement.
    """

    memory_reserve_mb: int = 1024
    min_sub_batch: int = 1
    max_jobs_per_gpu: int = 2
    share_unknown: bool = False
    starvation_bound_s: float = 48 * 3600.0
    aging_s: float = 3600.0
    reclaim: str = "preempt"
    borrow_bound_s: float = 3600.0
    split_charge: bool = True
    colocation_guard: bool = True
    reclaim_colocated: bool = True
    priority_preemption: bool = True
    placement: str = "spread"
    tiresias: TiresiasConfig = field(default_factory=TiresiasConfig)

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {self.placement!r}")
        for name in ("starvation_bound_s", "aging_s", "borrow_bound_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if self.reclaim not in RECLAIM_MODES:
            raise ValueError(f"reclaim must be one of {', '.join(RECLAIM_MODES)}, got {self.reclaim!r}")


RECLAIM_MODES: tuple[str, ...] = ("preempt", "bound", "both")
"""Values of :attr:`SchedulerConfig.reclaim`."""

FAIR_SWITCHES: tuple[str, ...] = (
    "split_charge",
    "colocation_guard",
    "reclaim_colocated",
    "priority_preemption",
)
"""The on/off fields of :class:`SchedulerConfig` that only ``sjf-bsbf-fair`` reads (docs/FAIRNESS.md §5)."""


def fair_switches_off(text: str) -> dict[str, bool]:
    """``"split_charge,colocation_guard"`` → ``{"split_charge": False, ...}`` (keyword arguments of
    :class:`SchedulerConfig`); ``""`` → ``{}``. Raises ``ValueError`` naming an unknown switch."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAIR_SWITCHES]
    if unknown:
        raise ValueError(f"unknown switch {unknown[0]!r}; one of {', '.join(FAIR_SWITCHES)}")
    return dict.fromkeys(names, False)


@dataclass(frozen=True, slots=True)
class TenantQuota:
    """A tenant's quota **(ours, docs/FAIRNESS.md)**: ``guaranteed_gpus`` it may always get back,
    and ``borrow_limit`` more GPUs it may borrow while others leave them idle (``None``: any idle
    GPU; 0: no borrowing). Counts are GPUs of running gangs (a shared GPU counts for both jobs).

    Raises ``ValueError`` for a negative count.
    """

    guaranteed_gpus: int
    borrow_limit: int | None = None

    def __post_init__(self) -> None:
        if self.guaranteed_gpus < 0 or (self.borrow_limit is not None and self.borrow_limit < 0):
            raise ValueError(
                f"quota counts must be ≥ 0 GPUs, got guaranteed {self.guaranteed_gpus}, "
                f"borrow limit {self.borrow_limit}"
            )

    @property
    def cap(self) -> float:
        """Most GPUs the tenant may hold: guaranteed + borrow limit (``inf`` without a limit)."""
        return math.inf if self.borrow_limit is None else self.guaranteed_gpus + self.borrow_limit


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a policy may look at in one round.

    ``pending``: jobs waiting for GPUs (any order; the policy sorts). ``running``: jobs holding
    GPUs. ``tenant_quotas``: tenant → :class:`TenantQuota`, or a plain int meaning
    ``TenantQuota(int)`` (guaranteed GPUs, unlimited borrowing); empty: no quotas. With quotas, a
    tenant missing from the mapping has no guarantee and may only borrow. ``type_quotas``: tenant →
    GPU type → :class:`TenantQuota` for that type only (:mod:`scheduling.core.gpu_types`).
    """

    now: float
    cluster: Cluster
    pending: tuple[Job, ...]
    running: tuple[RunningJob, ...]
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    tenant_quotas: Mapping[str, int | TenantQuota] = field(default_factory=dict)
    type_quotas: Mapping[str, Mapping[str, TenantQuota]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Share:
    """Why a job was co-located with ``partner_id`` (MODEL.md §2, the pairwise rule).

    ``xi_self``/``xi_partner``: slowdowns (shared ÷ exclusive iteration time, ≥ 1 normally);
    ``t_seq_s``/``t_con_s``: predicted mean completion time of the pair run one after the other
    vs. shared now (s); ``gpu_ids``: the partner's GPUs this job takes.
    """

    partner_id: JobId
    gpu_ids: tuple[int, ...]
    xi_self: float
    xi_partner: float
    t_seq_s: float
    t_con_s: float


Reason = str | Callable[["Start"], str]
"""A start's reason: the text, or a function of the :class:`Start` returning it, which the Start
calls the first time its reason is read (:mod:`scheduling.core.start_reasons`: the text of a
large SJF-BSBF round cost a sixth of it, and the simulator never reads it). The function must
read only the Start and what never changes (the cluster's GPUs), so the text is the same whenever
it is read."""


class Start:
    """Start ``job_id`` on ``gpu_ids`` with sub-batch ``sub_batch`` (``accum_steps`` micro-steps).

    Immutable, compared and hashed by its six fields like a frozen dataclass; ``reason`` is
    formatted on first read when it was given as a function (:data:`Reason`), so equality, hashing,
    ``repr`` and pickling (which carries the text) read it, and nothing else formats it.
    """

    __slots__ = ("job_id", "gpu_ids", "sub_batch", "accum_steps", "shares", "_reason")
    __match_args__ = ("job_id", "gpu_ids", "sub_batch", "accum_steps", "shares", "reason")

    job_id: JobId
    gpu_ids: tuple[int, ...]
    sub_batch: int
    accum_steps: int
    shares: tuple[Share, ...]
    _reason: Reason

    def __init__(
        self,
        job_id: JobId,
        gpu_ids: tuple[int, ...],
        sub_batch: int,
        accum_steps: int,
        shares: tuple[Share, ...] = (),
        reason: Reason = "",
    ) -> None:
        init = object.__setattr__
        init(self, "job_id", job_id)
        init(self, "gpu_ids", gpu_ids)
        init(self, "sub_batch", sub_batch)
        init(self, "accum_steps", accum_steps)
        init(self, "shares", shares)
        init(self, "_reason", reason)

    @property
    def reason(self) -> str:
        """Why it starts (shown on the dashboard); formatted once, on first read."""
        reason = self._reason
        if not isinstance(reason, str):
            reason = reason(self)
            object.__setattr__(self, "_reason", reason)
        return reason

    def _fields(self) -> tuple:
        return (self.job_id, self.gpu_ids, self.sub_batch, self.accum_steps, self.shares, self.reason)

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Start:
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Start(job_id={self.job_id!r}, gpu_ids={self.gpu_ids!r}, sub_batch={self.sub_batch!r}, "
            f"accum_steps={self.accum_steps!r}, shares={self.shares!r}, reason={self.reason!r})"
        )

    def __reduce__(self) -> tuple:
        return (Start, self._fields())  # the text travels, never the function


@dataclass(frozen=True, slots=True)
class Wait:
    """``job_id`` stays pending this round, and why (shown on the dashboard)."""

    job_id: JobId
    reason: str


@dataclass(frozen=True, slots=True)
class Preempt:
    """Stop a running job and put it back in the queue (preemptive baselines only)."""

    job_id: JobId
    reason: str


@dataclass(frozen=True, slots=True)
class RoundDecisions:
    """A policy's output for one round.

    Preemptions are applied before starts (a start may use GPUs freed by a preemption in the same
    round). ``waits`` may be empty when the policy was called with ``explain=False``.
    """

    policy: str
    now: float
    starts: tuple[Start, ...] = ()
    preemptions: tuple[Preempt, ...] = ()
    waits: tuple[Wait, ...] = ()


class Profile(Protocol):
    """Performance model of jobs: what a policy and the simulator ask about speed and memory.

    Implemented by ``scheduling.core.profiles.TableProfile``. All times are for the whole
    global batch of one iteration, on the job's own GPUs.

    Contract: every answer about a job depends on its ``model``, ``batch_size`` and ``memory_mb``
    only (iteration times also on its ``iter_time_s``), never on its gang size (``gpus``), id,
    tenant or progress. Policies memoise the answers by those fields and treat jobs that differ
    in gang size alone as one (``scheduling.core.profile_cache.answer_key``).
    """

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        """``t_j(b)``: exclusive time (s) of one iteration done as ``B_j/b`` micro-steps of ``b``."""
        ...

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        """``mem_j(b)``: memory per GPU (MB) when running micro-batches of ``sub_batch``."""
        ...

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        """Feasible sub-batch sizes, largest (``B_j``) first: powers of two dividing ``B_j``."""
        ...

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        """``(ξ_a, ξ_b)`` when ``a`` (at ``sub_a``) and ``b`` (at ``sub_b``) share GPUs."""
        ...

    def memory_known(self, job: Job) -> bool:
        """Whether ``job``'s memory is known (declared, in the table, or measured) rather than
        guessed: a job of unknown memory does not share (``SchedulerConfig.share_unknown``)."""
        ...

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        """Whether ``a`` at ``sub_a`` may share a GPU with ``b`` at ``sub_b`` at all: False for a
        pair that ran out of memory together, and (unless ``unknown_ok``) for one whose slowdown
        is a guess (nothing measured, nothing predicted). Depends on models and sub-batches only."""
        ...


class Policy(Protocol):
    """A scheduling policy: a pure function of a snapshot.

    ``name`` is its registry name; ``preemptive`` says whether it may return preemptions. A
    policy may also declare ``skip_rule`` (:class:`scheduling.core.skip.SkipRule`): when the
    simulator may skip its rounds without changing the result; ``reclaims``: whether it takes lent
    GPUs back by preemption; and ``splits_quota_use``: whether its quota gate counts a shared GPU
    by the normalised split (docs/FAIRNESS.md §1) rather than once for each of its jobs. Read the
    last with :func:`splits_quota_use`, which gives the default (``False``) to a policy that does
    not declare it.
    """

    name: str
    preemptive: bool

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round. Must not mutate anything; deterministic."""
        ...


def splits_quota_use(policy: object, config: SchedulerConfig | None = None) -> bool:
    """Whether ``policy``'s quota gate counts use by the normalised split: its ``splits_quota_use``
    attribute (``False`` where it declares none: use is the GPUs of the running gangs), and, given
    the round's ``config``, only while :attr:`SchedulerConfig.split_charge` is on (the switch that
    turns the split off in such a policy)."""
    declared = bool(getattr(policy, "splits_quota_use", False))
    return declared and (config is None or config.split_charge)
