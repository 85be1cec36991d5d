"""The pairwise sharing rule (MODEL.md §2; Luo et al., IWQoS 2024) on hand-computed cases."""

from __future__ import annotations

import math
import random
from bisect import bisect_left

import pytest

from scheduling.core.sharing import (
    benefit_threshold_s,
    best_prepared,
    gang_shares,
    losing_gaps,
    pairwise_benefit,
    plan_pair,
    prepare_options,
    shares,
    shares_when_equal,
)
from tests.unit.fakes import FakeProfile, job


def test_b_ends_first_branch() -> None:
    # A=100, B=40, ξa=1.2, ξb=1.5: ξa·A = 120 ≥ ξb·B = 60 → b ends first.
    # T_seq = 40 + 100/2 = 90; T_con = 100/2 + (1 − 1/2.4)·1.5·40 = 50 + 0.58333·60 = 85
    t_seq, t_con = pairwise_benefit(100, 40, 1.2, 1.5)
    assert t_seq == pytest.approx(90)
    assert t_con == pytest.approx(85)
    assert shares(t_seq, t_con)


def test_a_ends_first_branch() -> None:
    # A=20, B=100, ξa=1.5, ξb=1.2: ξa·A = 30 < ξb·B = 120 → a ends first.
    # T_seq = 100 + 10 = 110; T_con = 100/2 + (1 − 1/2.4)·1.5·20 = 50 + 0.58333·30 = 67.5
    t_seq, t_con = pairwise_benefit(20, 100, 1.5, 1.2)
    assert t_seq == pytest.approx(110)
    assert t_con == pytest.approx(67.5)


@pytest.mark.parametrize(
    ("xi_a", "xi_b", "verdict"),
    [
        # A = B: T_seq = 1.5·A; the job with the larger ξ ends last, T_con/A = 0.5 + (1 − 1/(2ξ_last))·ξ_first
        (1.0, 1.0, True),  # 0.5 + 0.5·1 = 1.0 < 1.5
        (2.0, 2.0, False),  # 0.5 + 0.75·2 = 2.0
        (1.5, 1.0, True),  # 0.5 + (1 − 1/3)·1 = 1.167
        (1.0, 1.5, True),  # the same pair seen from the other job
        (1.6, 1.5, False),  # 0.5 + (1 − 1/3.2)·1.5 = 1.531
    ],
)
def test_shares_when_equal(xi_a: float, xi_b: float, verdict: bool) -> None:
    assert shares_when_equal(xi_a, xi_b) is verdict
    assert shares(*pairwise_benefit(100.0, 100.0, xi_a, xi_b)) is verdict


def test_branches_meet_where_both_end_together() -> None:
    # ξa·A = ξb·B = 120: b-first gives 50 + (1 − 1/2.4)·1.2·100 = 50 + 70 = 120; a-first gives
    # 100/2 + (1 − 1/2.4)·1.2·100 = 120 too — T_con is continuous.
    assert pairwise_benefit(100, 100, 1.2, 1.2)[1] == pytest.approx(120)
    assert pairwise_benefit(100, 100 * (1 + 1e-9), 1.2, 1.2)[1] == pytest.approx(120)


@pytest.mark.parametrize(
    ("xi", "pays"), [(1.0, True), (1.3, True), (1.49, True), (1.5, False), (1.51, False), (2.0, False)]
)
def test_symmetric_slowdown_pays_iff_below_one_and_a_half(xi: float, pays: bool) -> None:
    # ξa = ξb = ξ, b ends first (A=1000, B=100): T_seq = 100 + 500 = 600,
    # T_con = 500 + (1 − 1/(2ξ))·ξ·100 = 500 + (ξ − 0.5)·100 → T_con < T_seq ⇔ ξ < 1.5 (MODEL.md §2)
    t_seq, t_con = pairwise_benefit(1000, 100, xi, xi)
    assert t_seq == pytest.approx(600)
    assert t_con == pytest.approx(500 + (xi - 0.5) * 100)
    assert shares(t_seq, t_con) is pays


@pytest.mark.parametrize(
    ("args", "word"),
    [
        ((-1, 10, 1.2, 1.2), "≥ 0 s"),
        ((10, -1, 1.2, 1.2), "≥ 0 s"),
        ((10, 10, 0.4, 1.2), "0.5"),
        ((10, 10, 1.2, 0.1), "0.5"),
    ],
)
def test_bad_arguments_raise(args: tuple[float, float, float, float], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        pairwise_benefit(*args)


def test_threshold_zero_when_every_b_pays() -> None:
    # ξa = ξb = 1.2: (1 − 1/2.4)·1.2 = 0.7 < 1 → any B > 0 pays
    assert benefit_threshold_s(100, 1.2, 1.2) == 0.0
    assert shares(*pairwise_benefit(100, 0.5, 1.2, 1.2))


def test_threshold_separates_paying_residents() -> None:
    # ξa = ξb = 2: (1 − 1/4)·2 = 1.5 ≥ 1 → threshold (2·2 − 2/2 − 1)·A = 2A = 20 for A = 10.
    assert benefit_threshold_s(10, 2.0, 2.0) == pytest.approx(20)
    # B = 21 (a first): T_con = 10.5 + 0.75·2·10 = 25.5 < T_seq = 21 + 5 = 26
    assert pairwise_benefit(10, 21, 2.0, 2.0) == pytest.approx((26, 25.5))
    # B = 19: T_con = 9.5 + 15 = 24.5 ≥ T_seq = 19 + 5 = 24
    assert pairwise_benefit(10, 19, 2.0, 2.0) == pytest.approx((24, 24.5))


# Sub-batch choice. Incoming model "a": mem = 1000 + 100·b MB → b=32: 4200, 16: 2600, 8: 1800,
# 4: 1400, 2: 1200, 1: 1100. Step factor 1 + 0.1·(32/b − 1): 16 → 1.1, 8 → 1.3, 4 → 1.7, 2 → 2.5,
# 1 → 4.1. Resident "b": 10,000 MB, 100 iterations of 1 s at its sub-batch 32 → B = 100 s.
PROFILE = FakeProfile(
    memory={"a": (1000, 100), "b": (10_000, 0)},
    slowdowns={("a", 16, "b", 32): (1.2, 1.2), ("a", 8, "b", 32): (1.05, 1.05)},
    default_xi=1.3,
    accum_overhead=0.1,
)
INCOMING = job(1, model="a", batch=32, iterations=100, iter_time_s=1.0)
RESIDENT = job(2, model="b", batch=32, iterations=100, iter_time_s=1.0)


def room(gpu_mb: float, reserve: float = 1024) -> float:
    return gpu_mb - 10_000 - reserve


def test_sub_batch_minimising_t_con_wins() -> None:
    # Plenty of room (49,140 MB GPU). T_con (b ends first each time, ξa=ξb=ξ → (ξ − 0.5)·B):
    # b=32: A=100, ξ 1.3: 50 + 0.8·100 = 130;  b=16: A=110, ξ 1.2: 55 + 0.7·100 = 125;
    # b=8: A=130, ξ 1.05: 65 + 0.55·100 = 120; b=4: A=170: 85 + 80 = 165; ... → b = 8.
    plan = plan_pair(PROFILE, INCOMING, RESIDENT, 32, room(49_140))
    assert plan is not None
    assert plan.sub_batch == 8
    assert plan.t_con_s == pytest.approx(120)
    assert plan.t_seq_s == pytest.approx(100 + 130 / 2)
    assert (plan.xi_self, plan.xi_partner) == (1.05, 1.05)
    assert plan.a_s == pytest.approx(130) and plan.b_s == pytest.approx(100)
    assert plan.beneficial


def test_sub_batch_limited_by_memory() -> None:
    # 12,800 MB GPU: room = 12,800 − 10,000 − 1,024 = 1,776 MB → 8 (1,800) no longer fits; 4 (1,400)
    # is the best left: A = 170, ξ 1.3: T_con = 85 + 0.8·100 = 165 < T_seq = 100 + 85 = 185.
    plan = plan_pair(PROFILE, INCOMING, RESIDENT, 32, room(12_800))
    assert plan is not None
    assert plan.sub_batch == 4
    assert plan.t_con_s == pytest.approx(165)
    assert plan.t_seq_s == pytest.approx(185)


def test_nothing_fits() -> None:
    # 12,000 MB GPU: room 976 MB < 1,100 MB (the incoming job at b = 1)
    assert plan_pair(PROFILE, INCOMING, RESIDENT, 32, room(12_000)) is None


def test_min_sub_batch_floor() -> None:
    # With a floor of 16 only b ∈ {32, 16} are tried: 16 wins (T_con 125 < 130).
    plan = plan_pair(PROFILE, INCOMING, RESIDENT, 32, room(49_140), min_sub_batch=16)
    assert plan is not None and plan.sub_batch == 16
    assert plan.t_con_s == pytest.approx(125)


def test_resident_keeps_its_sub_batch() -> None:
    # Resident at sub-batch 16: B = 100 × 1.1 = 110 s; no slowdown entry for resident sub-batch 16,
    # so ξ = 1.3 for every incoming sub-batch. b = 32: A = 100, ξa·A = 130 < ξb·B = 143 → a ends
    # first: T_con = 55 + 0.8·100 = 135; b = 16: A = 110, 143 ≥ 143 → 55 + 0.8·110 = 143; smaller
    # sub-batches are slower still → b = 32, T_seq = 110 + 50 = 160.
    plan = plan_pair(PROFILE, INCOMING, RESIDENT, 16, room(49_140))
    assert plan is not None
    assert plan.b_s == pytest.approx(110)
    assert plan.sub_batch == 32
    assert plan.t_con_s == pytest.approx(135)
    assert plan.t_seq_s == pytest.approx(160)


def test_gang_shares_use_the_slowest_gpu() -> None:
    # The incoming job joins two residents: ξ 1.2 with "b", ξ 1.5 (self) / 1.1 with "c".
    # Its pace is that of the slowest GPU: ξ_self = 1.5 for both pairs.
    profile = FakeProfile(slowdowns={("a", "b"): (1.2, 1.2), ("a", "c"): (1.5, 1.1)})
    other = job(3, model="c", batch=32, iterations=50, iter_time_s=1.0)
    explained = gang_shares(profile, INCOMING, 32, [(RESIDENT, 32, (0,)), (other, 32, (1,))])
    assert [s.partner_id for s in explained] == [2, 3]
    assert [s.xi_self for s in explained] == [1.5, 1.5]
    assert [s.xi_partner for s in explained] == [1.2, 1.1]
    # pair with b: A=100, B=100, ξa=1.5 → 150 ≥ 120 → T_con = 50 + (1 − 1/3)·1.2·100 = 130
    assert explained[0].t_con_s == pytest.approx(130)
    assert explained[0].t_seq_s == pytest.approx(150)
    # pair with c: A=100, B=50: 150 ≥ 55 → T_con = 50 + (1 − 1/3)·1.1·50 = 86.667; T_seq = 50 + 50
    assert explained[1].t_con_s == pytest.approx(50 + (2 / 3) * 55)
    assert explained[1].t_seq_s == pytest.approx(100)
    assert gang_shares(profile, INCOMING, 32, []) == ()


def test_prepared_options_give_the_pairwise_rule_to_the_bit() -> None:
    # best_prepared evaluates pairwise_benefit's formulas on parts computed once per option; the
    # numbers must be those of _pair_times exactly (the hot loop and the explanations agree)
    rng = random.Random(7)
    for _ in range(2_000):
        options = [
            (32 >> i, rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0.0, 5_000.0))
            for i in range(rng.randint(1, 4))
        ]
        b_s = rng.choice([0.0, rng.uniform(0.0, 10_000.0)])
        got = best_prepared(prepare_options(options), b_s)
        times = [pairwise_benefit(a_s, b_s, xi_a, xi_b) for _, xi_a, xi_b, a_s in options]
        t_con = min(t for _, t in times)
        index = next(i for i, (_, t) in enumerate(times) if t == t_con)  # the first of least T_con
        assert got == (t_con, times[index][0], index)


def in_gap(los: list[float], his: list[float], b_s: float) -> bool:
    """Whether ``b_s`` lies in one of the open intervals ``(los[i], his[i])``."""
    i = bisect_left(los, b_s) - 1
    return i >= 0 and b_s < his[i]


def test_losing_gaps_of_one_option_end_at_its_threshold() -> None:
    # A = 100 s, ξ_a = ξ_b = 1.5: (1 − 1/3)·1.5 = 1 is not < 1, so sharing pays iff
    # B > (2·1.5 − 1.5/1.5 − 1)·100 = 100 s (benefit_threshold_s); at B = 100 both sides are 150 s
    options = prepare_options([(32, 1.5, 1.5, 100.0)])
    los, his = losing_gaps(options)
    assert los == [0.0]
    assert 100 * (1 - 1e-6) < his[0] <= 100.0
    assert in_gap(los, his, 50.0) and not in_gap(los, his, 100.0) and not in_gap(los, his, 0.0)
    assert not shares(*pairwise_benefit(100.0, 100.0, 1.5, 1.5))
    assert shares(*pairwise_benefit(100.0, 100.0 * (1 + 1e-9), 1.5, 1.5))


def test_losing_gaps_hold_only_losing_residents() -> None:
    # every B in a gap must be one where best_prepared says sharing does not pay, also right next
    # to the gaps' ends (the floats on either side) and with several options (the verdict of the
    # option of least T_con is not monotone in B there)
    rng = random.Random(11)
    inside = 0
    for _ in range(3_000):
        options = prepare_options(
            [
                (
                    32 >> i,
                    rng.choice([1.0, 1.5, rng.uniform(0.5, 3.0)]),
                    rng.choice([1.0, 1.5, rng.uniform(0.5, 3.0)]),
                    rng.choice([0.0, 100.0, rng.uniform(0.0, 5_000.0)]),
                )
                for i in range(rng.randint(1, 4))
            ]
        )
        los, his = losing_gaps(options)
        points = [rng.uniform(0.0, 20_000.0) for _ in range(20)]
        for end in los + his:
            if math.isfinite(end):
                up = down = end
                for _ in range(4):
                    up, down = math.nextafter(up, math.inf), math.nextafter(down, -math.inf)
                    points += [up, down, (end + up) / 2]
        for b_s in points:
            if in_gap(los, his, b_s):
                inside += 1
                best = best_prepared(options, b_s)
                assert best is not None and not shares(best[1], best[0])
    assert inside > 1_000  # the gaps are not empty in general
