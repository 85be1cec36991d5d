"""The learned profile (scheduling/core/learning.py, docs/LEARNING.md): every expected value is
worked out by hand from the formulas in the module docstring (West's weighted update, the
conjugate normal update in log space, the order of trust), never taken from the code's output."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest

from scheduling.core.learning import (
    EMPTY,
    MAX_WEIGHT,
    PRIOR_SIGMA,
    Estimate,
    Knowledge,
    LearnedProfile,
    Learner,
    SampleStats,
    choose_iter_time,
    full_batch_time_s,
    iter_key,
    normalise_model,
    pair_id,
    posterior_log,
    side_key,
)
from scheduling.core.types import Job

E = math.e


def stats_of(*values: float) -> SampleStats:
    s = SampleStats()
    for v in values:
        s = s.add(v)
    return s


# -- SampleStats -------------------------------------------------------------------------------------


def test_no_sample_has_no_mean() -> None:
    s = SampleStats()
    assert (s.count, s.weight, s.spread) == (0, 0.0, 0.0)
    assert math.isnan(s.mean)


def test_two_samples_give_the_plain_mean_and_variance_of_their_logs() -> None:
    # ln 1 = 0, ln e = 1: mean 0.5, population variance ((0 − 0.5)² + (1 − 0.5)²)/2 = 0.25
    s = stats_of(1.0, E)
    assert (s.count, s.weight) == (2, 2.0)
    assert s.mean_log == pytest.approx(0.5)
    assert s.var_log == pytest.approx(0.25)
    assert s.spread == pytest.approx(0.5)
    assert s.mean == pytest.approx(math.sqrt(E))


def test_the_mean_is_geometric() -> None:
    # ln 2 and ln 8 = 3 ln 2: mean 2 ln 2 → 4; spread |ln 8 − ln 2| / 2 = ln 2
    s = stats_of(2.0, 8.0)
    assert s.mean == pytest.approx(4.0)
    assert s.spread == pytest.approx(math.log(2))


def test_past_max_weight_each_sample_weighs_one_over_max_weight() -> None:
    # 20 samples of 1 (ln 0), then e (ln 1): α = 1/20, mean 0 + 1/20 · 1 = 0.05,
    # variance (1 − 1/20) · (0 + 1/20 · 1²) = 0.95 · 0.05 = 0.0475
    assert MAX_WEIGHT == 20.0
    s = stats_of(*[1.0] * 20, E)
    assert (s.count, s.weight) == (21, 20.0)
    assert s.mean_log == pytest.approx(0.05)
    assert s.var_log == pytest.approx(0.0475)
    # a drifted speed is followed: 40 more samples of e leave (19/20)^40 ≈ 12.9 % of the old mean's gap
    later = stats_of(*[1.0] * 20, *[E] * 41)
    assert later.mean_log == pytest.approx(1 - (19 / 20) ** 41)


def test_add_returns_a_new_summary_and_refuses_non_positive_samples() -> None:
    s = stats_of(2.0)
    assert s.add(4.0) is not s and s.count == 1
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="positive finite"):
            s.add(bad)


# -- posterior_log ---------------------------------------------------------------------------------


def test_no_sample_leaves_the_prior() -> None:
    assert posterior_log(2.0, 0.15, None) == pytest.approx(math.log(2.0))
    assert posterior_log(2.0, 0.15, SampleStats()) == pytest.approx(math.log(2.0))


def test_one_clean_sample_outweighs_a_measured_prior_nine_to_one() -> None:
    # σ_p = 0.15, σ_o = OBS_SIGMA_MIN = 0.05 (one sample has no spread): precisions 1/0.0225 = 400/9
    # and 1/0.0025 = 400 → ln ξ̂ = (ln 2 · 400/9 + ln 1.5 · 400) / (400/9 + 400) = 0.1 ln 2 + 0.9 ln 1.5
    value = posterior_log(2.0, 0.15, stats_of(1.5))
    assert value == pytest.approx(0.1 * math.log(2.0) + 0.9 * math.log(1.5))
    assert math.exp(value) == pytest.approx(2**0.1 * 1.5**0.9) == pytest.approx(1.54378, abs=1e-5)


def test_the_observed_spread_widens_the_sample_sigma() -> None:
    # samples 1 and e: m = 0.5, spread 0.5 > 0.05 → σ_o² = 0.25, w = 2 → data precision 8;
    # prior 1 (ln 0) with σ_p = 1 → precision 1: ln ξ̂ = (0 · 1 + 0.5 · 8) / (1 + 8) = 4/9
    assert posterior_log(1.0, 1.0, stats_of(1.0, E)) == pytest.approx(4 / 9)


# -- choose_iter_time, full_batch_time_s -------------------------------------------------------------


def test_order_of_trust_for_iteration_times() -> None:
    own, tight_class, loose_class = stats_of(2.0), stats_of(3.0, 3.0, 3.0), stats_of(1.0, E, E * E)
    assert choose_iter_time(own, tight_class, 5.0, 7.0) == Estimate(pytest.approx(2.0), "measured", 1, 0.0)
    assert choose_iter_time(None, tight_class, 5.0, 7.0) == Estimate(pytest.approx(3.0), "learned", 3, 0.0)
    # two samples of the class are not enough to overrule a declaration
    assert choose_iter_time(None, stats_of(3.0, 3.0), 5.0, 7.0) == Estimate(5.0, "declared")
    # ln samples 0, 1, 2: spread sqrt(2/3) ≈ 0.82 > 0.25: a mixed class does not overrule it either,
    # but still beats the profile's guess (its geometric mean e)
    assert choose_iter_time(None, loose_class, 5.0, 7.0) == Estimate(5.0, "declared")
    learned = choose_iter_time(None, loose_class, None, 7.0)
    assert (learned.value, learned.source, learned.spread) == (
        pytest.approx(E),
        "learned",
        pytest.approx(math.sqrt(2 / 3)),
    )
    assert choose_iter_time(None, None, None, 7.0) == Estimate(7.0, "profile")
    assert choose_iter_time(SampleStats(), SampleStats(), None, 7.0) == Estimate(7.0, "profile")


@dataclass
class StubBase:
    """A base profile answering from dicts: ``iter_time_s = job.iter_time_s × factor[sub]``;
    slowdowns and their sources by ``(model_a, sub_a, model_b, sub_b)``."""

    factor: dict[int, float] = field(default_factory=lambda: {32: 1.0, 16: 1.5})
    xi: dict[tuple[str, int, str, int], tuple[float, float]] = field(default_factory=dict)
    source: dict[tuple[str, int, str, int], str] = field(default_factory=dict)
    known_memory: frozenset[str] = frozenset()

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        return job.iter_time_s * self.factor[sub_batch]

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        return 1000.0 + sub_batch

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        return (32, 16)

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        return self.xi[(a.model, sub_a, b.model, sub_b)]

    def slowdown_source(self, a: Job, sub_a: int, b: Job, sub_b: int) -> str:
        return self.source.get((a.model, sub_a, b.model, sub_b), "measured")

    def memory_known(self, job: Job) -> bool:
        return job.model in self.known_memory

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        return True


def job(job_id: int, model: str = "m", batch: int = 32, gpus: int = 1, iter_s: float = 1.0) -> Job:
    return Job(job_id, "t", model, batch, gpus, 100, 0.0, iter_s)


def test_full_batch_time_scales_by_the_profiles_speed_curve() -> None:
    # t_p(32) = 1.0 s, t_p(16) = 1.5 s: 3.0 s measured at 16 → 3.0 · 1.0 / 1.5 = 2.0 s at 32
    assert full_batch_time_s(StubBase(), job(1), 16, 3.0) == pytest.approx(2.0)
    assert full_batch_time_s(StubBase(), job(1), 32, 3.0) == 3.0


# -- keys ---------------------------------------------------------------------------------------------


def test_keys() -> None:
    assert normalise_model("ResNet-18") == normalise_model("resnet_18") == "resnet18"
    assert side_key(job(1, "VGG-16"), 8) == ("vgg16", 8)
    assert iter_key(job(1, "GPT-2", batch=4, gpus=8)) == ("gpt2", 4, 8)
    assert pair_id(("b", 8), ("a", 16)) == pair_id(("a", 16), ("b", 8)) == (("a", 16), ("b", 8))


# -- LearnedProfile ---------------------------------------------------------------------------------

A, B = job(1, "a"), job(2, "b")


def base_ab(source: str = "measured") -> StubBase:
    return StubBase(
        xi={("a", 32, "b", 32): (2.0, 1.2), ("b", 32, "a", 32): (1.2, 2.0)},
        source={("a", 32, "b", 32): source, ("b", 32, "a", 32): source},
    )


def test_with_nothing_learned_it_answers_as_its_base() -> None:
    profile = LearnedProfile(base_ab())
    assert profile.knowledge is EMPTY
    assert profile.slowdown(A, 32, B, 32) == (2.0, 1.2)
    assert profile.slowdown_estimate(A, 32, B, 32) == (Estimate(2.0, "measured"), Estimate(1.2, "measured"))
    assert profile.iter_time_s(A, 16) == 1.5 and profile.memory_mb(A, 16) == 1016.0
    assert profile.sub_batches(A) == (32, 16)
    assert profile.pair_allowed(A, 32, B, 32)


def test_a_sample_moves_only_its_own_side() -> None:
    # ξ of a beside b measured once at 1.5 over a measured prior 2.0: 0.1 ln 2 + 0.9 ln 1.5 (above);
    # ξ of b beside a has no sample: the prior 1.2
    knowledge = Knowledge(slowdowns={(("a", 32), ("b", 32)): stats_of(1.5)})
    profile = LearnedProfile(base_ab(), knowledge)
    xi_a, xi_b = profile.slowdown(A, 32, B, 32)
    assert xi_a == pytest.approx(math.exp(0.1 * math.log(2.0) + 0.9 * math.log(1.5)))
    assert xi_b == 1.2
    ea, eb = profile.slowdown_estimate(A, 32, B, 32)
    assert (ea.source, ea.count, eb.source, eb.count) == ("learned", 1, "measured", 0)
    assert profile.slowdown_source(A, 32, B, 32) == "learned"
    assert profile.slowdown_source(B, 32, A, 32) == "measured"
    # the reverse query gives the same numbers, swapped
    assert profile.slowdown(B, 32, A, 32) == (xi_b, pytest.approx(xi_a))


def test_the_prior_sigma_follows_the_priors_source() -> None:
    # a predicted prior (σ_p = 0.35): precision 1/0.1225; one sample of 1.5 (precision 400)
    assert PRIOR_SIGMA["predicted"] == 0.35
    knowledge = Knowledge(slowdowns={(("a", 32), ("b", 32)): stats_of(1.5)})
    xi_a, _ = LearnedProfile(base_ab("predicted"), knowledge).slowdown(A, 32, B, 32)
    p = 1 / 0.35**2
    assert xi_a == pytest.approx(math.exp((p * math.log(2.0) + 400 * math.log(1.5)) / (p + 400)))


def test_an_unknown_pair_does_not_share_until_both_sides_are_measured() -> None:
    unknown = LearnedProfile(base_ab("default"))
    assert not unknown.pair_allowed(A, 32, B, 32)
    assert unknown.pair_allowed(A, 32, B, 32, unknown_ok=True)
    one_side = LearnedProfile(
        base_ab("default"), Knowledge(slowdowns={(("a", 32), ("b", 32)): stats_of(1.5)})
    )
    assert not one_side.pair_allowed(A, 32, B, 32)
    both = LearnedProfile(
        base_ab("default"),
        Knowledge(slowdowns={(("a", 32), ("b", 32)): stats_of(1.5), (("b", 32), ("a", 32)): stats_of(1.1)}),
    )
    assert both.pair_allowed(A, 32, B, 32) and both.pair_allowed(B, 32, A, 32)
    # a guessed default prior (σ_p = 1) barely counts against a sample: precision 1 vs 400
    assert both.slowdown(A, 32, B, 32)[0] == pytest.approx(
        math.exp((math.log(2.0) + 400 * math.log(1.5)) / 401)
    )


def test_an_incompatible_pair_never_shares_in_either_order_at_those_sub_batches() -> None:
    base = base_ab()
    base.xi[("a", 16, "b", 32)] = (1.3, 1.3)
    profile = LearnedProfile(base, Knowledge(incompatible=frozenset({pair_id(("b", 32), ("a", 32))})))
    assert not profile.pair_allowed(A, 32, B, 32)
    assert not profile.pair_allowed(B, 32, A, 32, unknown_ok=True)
    assert profile.pair_allowed(A, 16, B, 32)  # another sub-batch, another pair


def test_memory_is_known_when_the_base_knows_it_or_it_was_measured() -> None:
    base = StubBase(known_memory=frozenset({"a"}))
    assert LearnedProfile(base).memory_known(job(1, "a"))
    assert not LearnedProfile(base).memory_known(job(2, "New-Net"))
    assert LearnedProfile(base, Knowledge(memory_seen=frozenset({"newnet"}))).memory_known(job(2, "New-Net"))


def test_over_the_shipped_table_with_nothing_learned_it_changes_no_answer() -> None:
    from scheduling.profiles import load_default_profile

    table = load_default_profile()
    profile = LearnedProfile(table)
    jobs = [job(1, "resnet18", 128), job(2, "vgg16", 16), job(3, "gpt2", 4), job(4, "mystery-net", 64)]
    for a in jobs:
        assert profile.memory_known(a) == table.memory_known(a)
        for b in jobs:
            for sub_a in table.sub_batches(a)[:2]:
                assert profile.slowdown(a, sub_a, b, b.batch_size) == table.slowdown(
                    a, sub_a, b, b.batch_size
                )
                assert profile.pair_allowed(a, sub_a, b, b.batch_size) == table.pair_allowed(
                    a, sub_a, b, b.batch_size
                )
                assert profile.slowdown_source(a, sub_a, b, b.batch_size) == table.slowdown_source(
                    a, sub_a, b, b.batch_size
                )
    assert not profile.pair_allowed(jobs[0], 128, jobs[3], 64)  # an unknown family: the 2.0 guess


# -- Learner ----------------------------------------------------------------------------------------


def test_the_learner_pools_exclusive_times_per_job_and_class() -> None:
    learner = Learner()
    a1, a2, a3, other = job(1, iter_s=9.0), job(2, iter_s=9.0), job(3, iter_s=9.0), job(4, gpus=2)
    learner.observe_exclusive(a1, 2.0)
    assert learner.iter_time(a1, 9.0, 8.0) == Estimate(pytest.approx(2.0), "measured", 1, 0.0)
    assert learner.iter_time(a2, 9.0, 8.0) == Estimate(9.0, "declared")  # one class sample
    learner.observe_exclusive(a1, 2.0)
    learner.observe_exclusive(a1, 2.0)
    # one job reporting three times is one job of its class: the declaration stands
    assert learner.jobs[a1.id].count == 3 and learner.classes[iter_key(a1)].count == 1
    assert learner.iter_time(a2, 9.0, 8.0) == Estimate(9.0, "declared")
    learner.observe_exclusive(a3, 2.0)
    learner.observe_exclusive(job(5, iter_s=9.0), 2.0)
    assert learner.iter_time(a2, 9.0, 8.0) == Estimate(pytest.approx(2.0), "learned", 3, 0.0)
    assert learner.iter_time(other, None, 8.0) == Estimate(8.0, "profile")  # another gang size
    assert learner.version == 0  # iteration times are not part of the knowledge


def test_the_knowledge_view_changes_only_when_something_was_learned() -> None:
    learner = Learner()
    first = learner.knowledge()
    assert first == EMPTY and learner.knowledge() is first
    learner.observe_slowdown(A, 32, B, 16, 1.4)
    second = learner.knowledge()
    assert second is not first and learner.knowledge() is second
    assert dict(second.slowdowns) == {(("a", 32), ("b", 16)): stats_of(1.4)}
    learner.mark_incompatible(B, 16, A, 32)
    learner.observe_memory(job(5, "New-Net"))
    third = learner.knowledge()
    assert third.incompatible == frozenset({(("a", 32), ("b", 16))})
    assert third.memory_seen == frozenset({"newnet"})
    version = learner.version
    learner.observe_memory(job(6, "new_net"))  # the same model, already seen
    assert learner.version == version and learner.knowledge() is third
    # the view is a copy: later samples do not leak into a round's view
    learner.observe_slowdown(A, 32, B, 16, 1.6)
    assert third.slowdowns[(("a", 32), ("b", 16))].count == 1


def test_only_material_changes_are_published() -> None:
    # equal samples: the mean and spread stay, the weight grows; published when it exceeds 1.25×
    # the last published weight: 1, 2, 3, 4 (> 3.75), 6 (> 5), 8 (> 7.5), 11, 14, 18 → 9 versions
    learner = Learner()
    versions = []
    for _ in range(25):
        learner.observe_slowdown(A, 32, B, 32, 1.5)
        versions.append(learner.version)
    assert versions[-1] == 9
    assert [i + 1 for i in range(25) if i == 0 or versions[i] != versions[i - 1]] == [
        1,
        2,
        3,
        4,
        6,
        8,
        11,
        14,
        18,
    ]
    shown = learner.knowledge().slowdowns[(("a", 32), ("b", 32))]
    assert (shown.count, shown.weight) == (18, 18.0)
    # a sample moving the mean of ln ξ by more than 0.005 is published at once: with weight 20,
    # one sample of 1.5·e^0.2 moves it by 0.2/20 = 0.01
    learner.observe_slowdown(A, 32, B, 32, 1.5 * math.exp(0.2))
    assert learner.version == 10
    assert learner.knowledge().slowdowns[(("a", 32), ("b", 32))].mean_log == pytest.approx(
        math.log(1.5) + 0.01
    )
