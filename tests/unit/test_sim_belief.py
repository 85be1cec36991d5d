"""Belief vs truth in the simulator (scheduling/sim/belief.py, perturbed.py, learning_options.py;
docs/LEARNING.md §5): a tiny trace whose three runs — oracle, prior only, learning — are worked
out by hand, the observation rule, the perturbed table, and the command-line options."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduling.core.learning import LearnedProfile
from scheduling.core.policies import get_policy
from scheduling.core.types import Cluster, Job, RoundDecisions, Share, Snapshot, Start
from scheduling.datapaths import shared_data_dir
from scheduling.profiles import load_default_profile
from scheduling.sim.belief import REPORT_INTERVAL_S, Belief
from scheduling.sim.cli import main
from scheduling.sim.engine import SimConfig, SimResult, simulate
from scheduling.sim.perturbed import PerturbedProfile, perturbation_factor


@dataclass
class PairProfile:
    """One sub-batch per job, its own iteration time, 1,000 MB, the same ``ξ`` for every pair
    (both sides); a measured pair (``slowdown_source``)."""

    xi: float

    def iter_time_s(self, job: Job, sub_batch: int) -> float:
        return job.iter_time_s

    def memory_mb(self, job: Job, sub_batch: int) -> float:
        return 1000.0

    def sub_batches(self, job: Job, min_sub_batch: int = 1) -> tuple[int, ...]:
        return (job.batch_size,)

    def memory_known(self, job: Job) -> bool:
        return True

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        return True

    def slowdown(self, a: Job, sub_a: int, b: Job, sub_b: int) -> tuple[float, float]:
        return self.xi, self.xi

    def slowdown_source(self, a: Job, sub_a: int, b: Job, sub_b: int) -> str:
        return "measured"


def job(jid: int, model: str, submit: float, iterations: int) -> Job:
    return Job(jid, "t", model, 8, 1, iterations, submit, 1.0)


# Two GPUs, rounds every 60 s, 1 s per iteration, true ξ = 2.0 for every pair.
#   job 1 (r, 200 it) and job 2 (r, 250 it) start alone at t=0 on GPUs 0 and 1;
#   job 3 (p, 100 it) arrives at 10, job 4 (p, 100 it) at 100.
# MODEL.md §2 with A = 100 s for the waiting job, B for the resident's remaining time:
# - t=60, job 3: B1 = 140, B2 = 190. Believing ξ = 1.2: vs job 1 p ends first (1.2·100 < 1.2·140),
#   T_con = 70 + (1 − 1/2.4)·120 = 140 < T_seq = 190 (vs job 2: 95 + 70 = 165 < 240): it joins
#   job 1 (smallest T_con). With the true ξ = 2: T_con = 70 + 0.75·200 = 220 ≥ 190 — regretted.
# - t=120, job 4: job 2 alone, B2 = 130, T_seq = 180. Believing 1.2: T_con = 65 + 70 = 135 < 180:
#   shares (true: 65 + 150 = 215 ≥ 180, regretted). Having learned ξ from the reports of t=90
#   (job 3 beside job 1 and job 1 beside job 3, both 2.0): ξ̂ = exp(0.1 ln 1.2 + 0.9 ln 2) = 1.9004
#   (one clean sample against a measured prior, 9 : 1), T_con = 65 + (1 − 1/3.8008)·190.04 =
#   205.04 ≥ 180: job 4 waits.
# Then, at the true ξ = 2 (rates halve while shared):
# - prior only: job 3 ends 60 + 200 = 260, job 1 (60 + 100 it done by then) 300; job 4 ends
#   120 + 200 = 320, job 2 (120 + 100 done) 350: JCTs 300, 350, 250, 220 → mean 280 s.
# - learning: job 2 ends 250 alone; job 1 and 3 as above; job 4 starts at the round of 300 (after
#   job 1's completion; no round falls between 250 and 300) and ends 400: JCTs 300, 250, 250, 300
#   → mean 275 s.
# - oracle (believing ξ = 2): nobody ever shares (job 3 at t=60: 220 ≥ 190 and 245 ≥ 240; t=120:
#   170 ≥ 130 and 215 ≥ 180; ...); job 1 ends 200, job 2 250, job 3 starts at 240 and ends 340,
#   job 4 starts at 300 and ends 400: JCTs 200, 250, 330, 300 → mean 270 s.
JOBS = [job(1, "r", 0, 200), job(2, "r", 0, 250), job(3, "p", 10, 100), job(4, "p", 100, 100)]
TRUTH = PairProfile(2.0)


def run(prior: PairProfile | None, learn: bool = False) -> SimResult:
    belief = None if prior is None else Belief(TRUTH, prior, learn=learn)
    return simulate(JOBS, Cluster.uniform(1, 2), get_policy("sjf-bsbf"), TRUTH, SimConfig(), belief=belief)


def ends(result: SimResult) -> dict[int, float]:
    return {o.job_id: o.end_time for o in result.outcomes}


def test_oracle_prior_only_and_learning_by_hand() -> None:
    oracle, prior_only, learning = run(None), run(PairProfile(1.2)), run(PairProfile(1.2), learn=True)
    assert ends(oracle) == {1: 200.0, 2: 250.0, 3: 340.0, 4: 400.0}
    assert ends(prior_only) == {3: 260.0, 1: 300.0, 4: 320.0, 2: 350.0}
    assert ends(learning) == {2: 250.0, 3: 260.0, 1: 300.0, 4: 400.0}
    mean = {
        name: sum(o.jct_s for o in r.outcomes) / 4
        for name, r in [("o", oracle), ("p", prior_only), ("l", learning)]
    }
    assert mean == {"o": 270.0, "p": 280.0, "l": 275.0}
    assert oracle.learning is None
    p, lr = prior_only.learning, learning.learning
    assert p is not None and lr is not None
    assert (p.decisions, p.regretted, lr.decisions, lr.regretted) == (2, 2, 1, 1)
    # every predicted ξ was 1.2 against a true 2.0: |1.2 − 2| / 2 = 40 %, two sides per pair
    assert (p.pair_sides, p.xi_mape, lr.pair_sides, lr.xi_mape) == (
        4,
        pytest.approx(0.4),
        2,
        pytest.approx(0.4),
    )
    assert p.slowdown_reports == p.exclusive_reports == 0
    # learning: job 1 and 3 report their ξ at 90 (the pair from 60); exclusive reports at 30 from
    # jobs 1 and 2 (alone from 0), job 1 again at 290 (alone from 260, ends 300), job 2 is never
    # joined (alone from 0, one segment), job 3 never alone, job 4 alone from 300 → 330
    assert (lr.slowdown_reports, lr.exclusive_reports) == (2, 4)


def test_a_belief_equal_to_the_truth_changes_nothing() -> None:
    oracle = run(None)
    for learn in (False, True):
        again = run(TRUTH, learn=learn)
        assert ends(again) == ends(oracle)
        assert again.learning is not None and again.learning.regretted == 0


def test_a_co_location_shorter_than_the_report_interval_is_not_reported() -> None:
    # scripted: job 1 starts alone at 0; job 2 joins it at 20 (< 30 s alone: no exclusive report);
    # at 40 job 3 is not started; the pair lasts until job 2 ends: reports at 50 from both jobs
    assert REPORT_INTERVAL_S == 30.0

    class Scripted:
        name, preemptive = "scripted", False

        def decide(self, snapshot: Snapshot, profile: object, *, explain: bool = True) -> RoundDecisions:
            starts = {
                0.0: (Start(1, (0,), 8, 1),),
                20.0: (Start(2, (0,), 8, 1, (Share(1, (0,), 1.2, 1.2, 0.0, 0.0),)),),
            }.get(snapshot.now, ())
            return RoundDecisions(self.name, snapshot.now, starts)

    jobs = [job(1, "r", 0, 1000), job(2, "p", 0, 40)]
    belief = Belief(TRUTH, PairProfile(1.2), learn=True)
    result = simulate(
        jobs, Cluster.uniform(1, 1), Scripted(), TRUTH, SimConfig(round_interval_s=10.0), belief=belief
    )
    # job 2: 40 it at rate 1/2 from 20 → ends 100; job 1 alone again from 100 (reports at 130)
    assert ends(result)[2] == 100.0
    assert result.learning is not None
    assert (result.learning.slowdown_reports, result.learning.exclusive_reports) == (2, 1)
    knowledge = belief.learner.knowledge() if belief.learner else None
    assert knowledge is not None and set(knowledge.slowdowns) == {(("r", 8), ("p", 8)), (("p", 8), ("r", 8))}
    assert isinstance(belief.profile(), LearnedProfile)


def test_measurement_noise_is_seeded() -> None:
    def noisy(seed: int) -> tuple:
        belief = Belief(TRUTH, PairProfile(1.2), learn=True, measure_noise=0.1, seed=seed)
        simulate(JOBS, Cluster.uniform(1, 2), get_policy("sjf-bsbf"), TRUTH, SimConfig(), belief=belief)
        assert belief.learner is not None
        return tuple(sorted((k, s.mean_log) for k, s in belief.learner.slowdowns.items()))

    assert noisy(1) == noisy(1) != noisy(2)
    with pytest.raises(ValueError, match="noise"):
        Belief(TRUTH, PairProfile(1.2), measure_noise=-0.1)


# -- the perturbed table -------------------------------------------------------------------------


def test_perturbation_factors_are_uniform_in_the_stated_band_and_reproducible() -> None:
    factors = [perturbation_factor(0.3, 7, "prior", f"t{i}", f"u{i}") for i in range(4000)]
    assert all(0.7 <= f <= 1.3 for f in factors)
    # uniform on [0.7, 1.3]: mean 1, variance 0.6² / 12 = 0.03 (four standard errors of slack)
    assert sum(factors) / len(factors) == pytest.approx(1.0, abs=4 * math.sqrt(0.03 / 4000))
    assert sum((f - 1) ** 2 for f in factors) / len(factors) == pytest.approx(0.03, rel=0.1)
    assert perturbation_factor(0.3, 7, "prior", "a", "b") == perturbation_factor(0.3, 7, "prior", "a", "b")
    assert perturbation_factor(0.3, 7, "prior", "a", "b") != perturbation_factor(0.3, 7, "prior", "b", "a")
    assert perturbation_factor(0.3, 7, "prior", "a", "b") != perturbation_factor(0.3, 7, "truth", "a", "b")
    assert perturbation_factor(0.0, 7, "prior", "a", "b") == 1.0
    for bad in (-0.1, 1.0, math.nan):
        with pytest.raises(ValueError, match="error"):
            perturbation_factor(bad, 0, "prior", "a", "b")


def test_the_perturbed_table_scales_each_slowdown_and_nothing_else() -> None:
    table = load_default_profile()
    perturbed = PerturbedProfile(table, 0.3, seed=3)
    a, b = Job(1, "t", "resnet18", 128, 1, 10, 0.0, 0.5), Job(2, "t", "vgg16", 16, 1, 10, 0.0, 0.2)
    type_a, type_b = table.job_type_for("resnet18", 64), table.job_type_for("vgg16", 16)
    assert type_a and type_b and perturbed.job_type(a, 64) == type_a
    xi_a, xi_b = table.slowdown(a, 64, b, 16)
    expected = (
        max(1.0, perturbation_factor(0.3, 3, "prior", type_a, type_b) * xi_a),
        max(1.0, perturbation_factor(0.3, 3, "prior", type_b, type_a) * xi_b),
    )
    assert perturbed.slowdown(a, 64, b, 16) == expected
    assert perturbed.iter_time_s(a, 64) == table.iter_time_s(a, 64)
    assert perturbed.memory_mb(a, 64) == table.memory_mb(a, 64)
    assert perturbed.sub_batches(a) == table.sub_batches(a)
    assert perturbed.slowdown_source(a, 64, b, 16) == table.slowdown_source(a, 64, b, 16)
    assert perturbed.pair_allowed(a, 64, b, 16) == table.pair_allowed(a, 64, b, 16)
    assert PerturbedProfile(table, 0.0, seed=3).slowdown(a, 64, b, 16) == (xi_a, xi_b)
    with pytest.raises(ValueError, match="salt"):
        PerturbedProfile(table, 0.3, 3, "belief")


# -- command line ------------------------------------------------------------------------------------

TESTBED = shared_data_dir() / "traces" / "sjfbsbf-testbed-61.csv"
needs_testbed = pytest.mark.skipif(not TESTBED.exists(), reason="shared data folder not found")


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@needs_testbed
def test_learning_over_an_exact_prior_is_the_oracle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--trace", str(TESTBED), "--cluster", "4x8", "--policies", "sjf-ffs,sjf-bsbf", "--no-progress"]
    code, plain, _ = cli([*base, "--json", str(tmp_path / "plain.json")], capsys)
    assert code == 0 and "learning" not in plain
    code, learned, _ = cli([*base, "--learn", "--json", str(tmp_path / "learn.json")], capsys)
    assert code == 0
    before = json.loads((tmp_path / "plain.json").read_text())
    after = json.loads((tmp_path / "learn.json").read_text())
    assert "learning" not in before and all("learning" not in p for p in before["policies"].values())
    assert after["learning"] == {
        "prior_error": None,
        "truth_error": None,
        "learn": True,
        "measure_noise": 0.0,
        "report_interval_s": 30.0,
    }
    for name, summary in after["policies"].items():
        stats = summary.pop("learning")
        # the same run; only more rounds (a report wakes the round a decision-less one skipped)
        assert summary.pop("rounds") >= before["policies"][name].pop("rounds")
        assert summary == before["policies"][name]
        assert stats["xi_mape"] is None or stats["xi_mape"] < 1e-12  # round-off of the log-space mean
        assert name == "sjf-ffs" or stats["regretted"] == 0
    table = learned.split("learning", 1)[1]
    assert "regretted" in table and "sjf-bsbf" in table


@needs_testbed
def test_a_prior_error_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    args = ["--trace", str(TESTBED), "--cluster", "4x8", "--policies", "sjf-bsbf", "--no-progress"]
    code, _, _ = cli([*args, "--prior-error", "0.3", "--seed", "1", "--json", str(out)], capsys)
    assert code == 0
    stats = json.loads(out.read_text())["policies"]["sjf-bsbf"]["learning"]
    assert stats["decisions"] > 0 and 0 < stats["xi_mape"] <= 0.3  # |f·ξ − ξ|/ξ ≤ E per side
    assert len(stats["xi_mape_parts"]) == 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prior-error", "1.5"], "--prior-error must be in [0, 1)"),
        (["--truth-error", "-0.1"], "--truth-error must be in [0, 1)"),
        (["--measure-noise", "0.1"], "--measure-noise needs --learn"),
        (["--learn", "--measure-noise", "-1"], "--measure-noise must be a finite number ≥ 0"),
    ],
)
def test_bad_learning_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,batch_size,iteration_time\n0,1,0,1,vgg16,16,1000\n"
    )
    code, _, err = cli(["--trace", str(trace), "--cluster", "1x1", "--no-progress", *args], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_help_describes_the_learning_options(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(["--help"], capsys)
    text = " ".join(out.split())
    assert code == 0
    for flag in ("--prior-error E", "--truth-error E", "--learn", "--measure-noise S"):
        assert flag in text
    assert "[1-E, 1+E]" in text and "30 s" in text
