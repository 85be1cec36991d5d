"""The pairwise sharing rule and the sub-batch choice of SJF-BSBF (pure functions).

Source: Luo et al., "Scheduling Deep Learning Jobs in Multi-Tenant GPU Clusters via Wise Resource
Sharing", IWQoS 2024 — the paper's Theorem 1 as its authors' code applies it; written down in
MODEL.md §2 (shared docs). Times in seconds (s), memory in MB, slowdowns ``ξ`` dimensionless
(shared ÷ exclusive iteration time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.core.types import Job, Profile, Share


def pairwise_benefit(a_s: float, b_s: float, xi_a: float, xi_b: float) -> tuple[float, float]:
    """``(T_seq, T_con)``: mean completion time (s, from now) of a waiting job ``a`` and a running
    job ``b``, run one after the other vs. shared from now on (MODEL.md §2).

    ``a_s`` = ``A``, the exclusive time ``a`` still needs (s); ``b_s`` = ``B``, the remaining exclusive
    time of ``b`` (s); ``xi_a``, ``xi_b`` ≥ 0.5 their slowdowns while sharing.

    - ``T_seq = B + A/2``;
    - ``b`` ends first (``ξ_a·A ≥ ξ_b·B``): ``T_con = A/2 + (1 − 1/(2ξ_a))·ξ_b·B``;
    - ``a`` ends first: ``T_con = B/2 + (1 − 1/(2ξ_b))·ξ_a·A``.

    Share iff ``T_con < T_seq`` (:func:`shares`). Raises ``ValueError`` for a negative time or a
    slowdown below 0.5 (there the coefficients ``1 − 1/(2ξ)`` turn negative and the formulas lose meaning).
    """
    if a_s < 0 or b_s < 0:
        raise ValueError(f"exclusive times must be ≥ 0 s, got A={a_s}, B={b_s}")
    if xi_a < 0.5 or xi_b < 0.5:
        raise ValueError(f"slowdowns must be ≥ 0.5, got ξ_a={xi_a}, ξ_b={xi_b}")
    return _pair_times(a_s, b_s, xi_a, xi_b)


def _pair_times(a_s: float, b_s: float, xi_a: float, xi_b: float) -> tuple[float, float]:
    """:func:`pairwise_benefit` without the argument checks (hot loops whose inputs are checked)."""
    t_seq = b_s + a_s / 2
    if xi_a * a_s >= xi_b * b_s:
        return t_seq, a_s / 2 + (1 - 1 / (2 * xi_a)) * xi_b * b_s
    return t_seq, b_s / 2 + (1 - 1 / (2 * xi_b)) * xi_a * a_s


def benefit_threshold_s(a_s: float, xi_a: float, xi_b: float) -> float:
    """The ``B`` (s) above which sharing pays for a waiting job of exclusive time ``a_s``.

    Derived from :func:`pairwise_benefit` (MODEL.md §2): if ``(1 − 1/(2ξ_a))·ξ_b < 1`` every
    ``B > 0`` pays (threshold 0); otherwise sharing pays iff ``a`` ends first and
    ``B > (2ξ_a − ξ_a/ξ_b − 1)·A``. So for fixed ``(A, ξ_a, ξ_b)`` the set of beneficial residents
    is ``{B > threshold}`` — policies use it to skip residents that cannot pay.
    """
    if (1 - 1 / (2 * xi_a)) * xi_b < 1:
        return 0.0
    return (2 * xi_a - xi_a / xi_b - 1) * a_s


def shares(t_seq: float, t_con: float) -> bool:
    """The pairwise rule's verdict: sharing pays iff ``T_con < T_seq`` (strict)."""
    return t_con < t_seq


def shares_when_equal(xi_a: float, xi_b: float) -> bool:
    """The pairwise rule's verdict for two jobs of equal remaining exclusive time (``A = B``):
    ``T_con < T_seq = 1.5·A`` with ``T_con/A = 0.5 + (1 − 1/(2ξ_last))·ξ_first``, where the job
    with the larger ``ξ`` ends last (:func:`pairwise_benefit` at ``A = B``). Independent of ``A``;
    used to compare slowdown estimates by the decisions they lead to
    (``scheduling.profiles.predictor_fit``). No argument checks."""
    t_seq, t_con = _pair_times(1.0, 1.0, xi_a, xi_b)
    return shares(t_seq, t_con)


@dataclass(frozen=True, slots=True)
class PairPlan:
    """The best way for an incoming job to share with one resident (MODEL.md §2).

    ``sub_batch``: the incoming job's sub-batch; ``xi_self``/``xi_partner``: slowdowns of the
    incoming job and of the resident; ``a_s``/``b_s``: their exclusive remaining times (s) at their
    sub-batches; ``t_seq_s``/``t_con_s``: the pairwise rule's predictions (s).
    """

    sub_batch: int
    xi_self: float
    xi_partner: float
    a_s: float
    b_s: float
    t_seq_s: float
    t_con_s: float

    @property
    def beneficial(self) -> bool:
        """Whether the pairwise rule says this pair should share (``T_con < T_seq``)."""
        return shares(self.t_seq_s, self.t_con_s)


def resident_remaining_s(profile: Profile, resident: Job, resident_sub_batch: int) -> float:
    """``B = R_b · t_b(b_b)``: remaining exclusive time (s) of a running job at its sub-batch."""
    return resident.remaining_iterations * profile.iter_time_s(resident, resident_sub_batch)


def plan_pair(
    profile: Profile,
    incoming: Job,
    resident: Job,
    resident_sub_batch: int,
    room_mb: float,
    min_sub_batch: int = 1,
) -> PairPlan | None:
    """Choose the incoming job's sub-batch for sharing with ``resident`` (MODEL.md §2).

    Tries every sub-batch of ``profile.sub_batches(incoming, min_sub_batch)`` and keeps the one that
    minimises ``T_con`` among those whose memory fits: ``mem_incoming(b) ≤ room_mb``, where
    ``room_mb`` = GPU memory − ``mem_resident(b_resident)`` − reserve (MB), the smallest over the
    GPUs to be shared. The resident keeps its sub-batch (ours). ``A = R_a · t_a(b)`` at the
    candidate sub-batch ``b``; ``B = R_b · t_b(b_resident)``. Ties on ``T_con`` keep the larger
    sub-batch (fewer gradient-accumulation steps).

    Returns ``None`` when no sub-batch fits in memory. The returned plan may be non-beneficial
    (check :attr:`PairPlan.beneficial`): the rule picks the sub-batch first, then judges it.
    """
    r_a = incoming.remaining_iterations
    options = [
        (
            sub,
            *profile.slowdown(incoming, sub, resident, resident_sub_batch),
            r_a * profile.iter_time_s(incoming, sub),
        )
        for sub in profile.sub_batches(incoming, min_sub_batch)
        if profile.memory_mb(incoming, sub) <= room_mb
    ]
    b_s = resident_remaining_s(profile, resident, resident_sub_batch)
    best = best_option(options, b_s)
    if best is None:
        return None
    t_con, t_seq, index = best
    sub, xi_a, xi_b, a_s = options[index]
    return PairPlan(sub, xi_a, xi_b, a_s, b_s, t_seq, t_con)


SubBatchOption = tuple[int, float, float, float]
"""``(sub_batch, ξ_incoming, ξ_resident, A)``: one memory-feasible way for a job to share (A in s)."""


def best_option(options: Sequence[SubBatchOption], b_s: float) -> tuple[float, float, int] | None:
    """``(T_con, T_seq, index)`` of the option minimising ``T_con`` against a resident of remaining
    time ``b_s`` (s); ties keep the earlier option (the larger sub-batch when ``options`` run
    largest first). ``None`` if ``options`` is empty. Shared by :func:`plan_pair` and the SJF-BSBF
    policy's hot loop (which prepares its options once: :func:`best_prepared`)."""
    return best_prepared(prepare_options(options), b_s)


PreparedOption = tuple[int, float, float, float, float, float]
"""One :data:`SubBatchOption` with the parts of :func:`pairwise_benefit` that do not depend on
``B``: ``(sub_batch, A/2, ξ_a·A, ξ_b, (1 − 1/(2ξ_a))·ξ_b, (1 − 1/(2ξ_b))·ξ_a·A)``."""


def prepare_options(options: Sequence[SubBatchOption]) -> tuple[PreparedOption, ...]:
    """The options as :data:`PreparedOption`, each part computed in :func:`_pair_times`' own
    operation order (left to right), so :func:`best_prepared` gives its numbers to the bit (a
    test checks it)."""
    return tuple(
        [
            (sub, a_s / 2, xi_a * a_s, xi_b, (1 - 1 / (2 * xi_a)) * xi_b, (1 - 1 / (2 * xi_b)) * xi_a * a_s)
            for sub, xi_a, xi_b, a_s in options
        ]
    )


def best_prepared(options: Sequence[PreparedOption], b_s: float) -> tuple[float, float, int] | None:
    """:func:`best_option` on prepared options: ``T_seq = B + A/2``; ``T_con = A/2 + κ·B`` when
    ``ξ_a·A ≥ ξ_b·B`` (the resident ends first), else ``B/2 + μ·A`` (MODEL.md §2)."""
    # the best so far in locals, one tuple at the end (the policy's hot loop calls this per resident)
    found, t_best, half_best, index = -1, 0.0, 0.0, 0
    for _, half_a, xi_a_a, xi_b, kappa, mu_a in options:
        t_con = half_a + kappa * b_s if xi_a_a >= xi_b * b_s else b_s / 2 + mu_a
        if found < 0 or t_con < t_best:
            found, t_best, half_best = index, t_con, half_a
        index += 1
    return None if found < 0 else (t_best, b_s + half_best, found)


def gang_shares(
    profile: Profile,
    job: Job,
    sub_batch: int,
    partners: Sequence[tuple[Job, int, tuple[int, ...]]],
    remaining_s: Sequence[float] | None = None,
) -> tuple[Share, ...]:
    """The :class:`Share` explanations of ``job`` starting at ``sub_batch`` next to ``partners``.

    ``partners``: ``(resident job, its sub-batch, the GPU ids of it that ``job`` takes)``. A gang
    that shares several GPUs runs at the pace of its slowest GPU (MODEL.md §2), so the incoming
    job's slowdown is the largest ``ξ`` over its partners **(ours)**; each partner keeps its own
    pairwise ``ξ``. ``T_seq``/``T_con`` come from :func:`pairwise_benefit` with
    ``A = R_a · t_a(sub_batch)`` and ``B = R_b · t_b(b_b)``; ``remaining_s``: each partner's ``B``
    when the caller has it (:func:`resident_remaining_s` of the same profile), so it is not
    computed again.
    """
    if not partners:
        return ()
    pairs = [profile.slowdown(job, sub_batch, partner, sub) for partner, sub, _ in partners]
    xi_self = max([xi_a for xi_a, _ in pairs])
    a_s = job.remaining_iterations * profile.iter_time_s(job, sub_batch)
    shares: list[Share] = []
    if remaining_s is None:
        remaining_s = [resident_remaining_s(profile, partner, sub) for partner, sub, _ in partners]
    for (partner, _, gpu_ids), (_, xi_partner), b_s in zip(partners, pairs, remaining_s, strict=True):
        t_seq, t_con = _pair_times(a_s, b_s, xi_self, xi_partner)
        shares.append(Share(partner.id, gpu_ids, xi_self, xi_partner, t_seq, t_con))
    return tuple(shares)


# Relative slack of :func:`losing_gaps` (s per s of magnitude): far above the few roundings of
# ``best_prepared`` (each ≤ 2⁻⁵³ of its operands), so a comparison whose exact margin exceeds it
# comes out the same in floating point.
_SLACK = 1e-12


def losing_gaps(options: Sequence[PreparedOption]) -> tuple[list[float], list[float]]:
    """Open intervals ``(lo, hi)`` of ``B`` (s) on which :func:`best_prepared` provably says sharing
    does not pay (its best ``T_con`` ≥ its ``T_seq``), as the lists ``(los, his)``, sorted and
    disjoint; ``([], [])`` when none can be proven.

    Why it is a fixed set: each option's two ``T_con`` branches and its ``T_seq`` are lines in
    ``B`` (MODEL.md §2), and :func:`best_prepared` only compares lines of that set (and ``ξ_a·A``
    with ``ξ_b·B``). Between the ``B`` where two of them are within ``_SLACK`` of the magnitude of
    the terms (an interval per pair, :func:`_uncertain`), every comparison keeps its sign, in
    exact arithmetic and in floating point alike (two equal lines are a tie at every ``B``, to the
    bit), so the verdict is that of any point inside: it is evaluated at the midpoint. ``B ≤ 0``
    and the uncertain intervals are never in a gap: a resident there is judged exactly. Cost
    O(k²) for ``k`` options (the policy computes it at most once per waiting job and resident
    group). The slack is relative (10⁻¹²); near-parallel lines make wide uncertain intervals,
    identical ones none.
    """
    lines: list[tuple[float, float]] = []  # (value at B = 0, slope) of every line compared
    s0 = s1 = 1.0
    for _, half_a, xi_a_a, xi_b, kappa, mu_a in options:
        lines += [(half_a, kappa), (mu_a, 0.5), (half_a, 1.0)]
        s0 += half_a + mu_a + xi_a_a
        s1 += kappa + xi_b + 1.5
    k0, k1 = _SLACK * s0, _SLACK * s1
    # the branch choice ξ_a·A ≥ ξ_b·B of each option, and every pair of lines
    pairs = [(xi_a_a, -xi_b) for _, _, xi_a_a, xi_b, _, _ in options]
    pairs += [(c1 - c2, a1 - a2) for i, (c1, a1) in enumerate(lines) for c2, a2 in lines[i + 1 :]]
    spans = []
    for c, a in pairs:
        if c == 0.0 and a == 0.0:
            # the same line twice (e.g. κ = 1: A/2 + κ·B is T_seq): best_prepared computes the two
            # to the same bits at every B, so their comparison is the same tie everywhere
            continue
        span = _uncertain(c, a, k0, k1)
        if span is not None:
            spans.append(span)
    spans.sort()
    los: list[float] = []
    his: list[float] = []
    edge = 0.0  # B ≤ 0 is never in a gap
    spans.append((math.inf, math.inf))
    for lo, hi in spans:
        if lo > edge:
            mid = (edge + lo) / 2 if lo < math.inf else 2 * edge + 1.0
            best = best_prepared(options, mid) if edge < mid < lo else None
            if best is not None and not best[0] < best[1]:
                los.append(edge)
                his.append(lo)
        if hi > edge:
            edge = hi
    return los, his


def _uncertain(c: float, a: float, k0: float, k1: float) -> tuple[float, float] | None:
    """The interval of ``B ≥ 0`` where ``|c + a·B| ≤ k0 + k1·B`` (a convex set: an interval),
    widened by a relative 10⁻⁹ against the rounding of its own computation; ``None`` if empty."""
    lo, hi = 0.0, math.inf
    # c + a·B ≤ k0 + k1·B, i.e. (a − k1)·B ≤ k0 − c
    u, v = a - k1, k0 - c
    if u > 0:
        hi = v / u
    elif u < 0:
        lo = v / u
    elif v < 0:
        return None
    # c + a·B ≥ −k0 − k1·B, i.e. (a + k1)·B ≥ −k0 − c
    u, v = a + k1, -k0 - c
    if u > 0:
        lo = max(lo, v / u)
    elif u < 0:
        hi = min(hi, v / u)
    elif v > 0:
        return None
    if lo > hi or hi < 0:
        return None
    return lo * (1 - 1e-9) if lo > 0 else lo * (1 + 1e-9), hi * (1 + 1e-9)
