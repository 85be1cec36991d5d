"""The performance profile: TableProfile semantics, the shipped table and the import command.

Hand-made tables check the formulas (values worked out in the comments); the shipped table is
checked against Gavel's public measurements read from the shared data folder.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.core.profiles import (
    UNKNOWN_FAMILY,
    ProfileError,
    SlowdownPredictor,
    TableProfile,
    samples_per_s,
    sub_batch_sizes,
)
from scheduling.core.types import Job
from scheduling.profiles import (
    DEFAULT_PROFILE_PATH,
    import_gavel,
    load_default_profile,
    load_profile,
    predictor_fit,
)
from scheduling.profiles.lucid import validate_lucid


def job(
    model: str, batch: int, iter_time_s: float = 1.0, memory_mb: float | None = None, gpus: int = 1
) -> Job:
    return Job(1, "alice", model, batch, gpus, 100, 0.0, iter_time_s, memory_mb)


def small_table() -> dict[str, Any]:
    """Two measured families: "Fam" at batches 16 and 64 (160 and 320 samples/s), "Solo" at none."""
    return {
        "format": "sharewise-profile/1",
        "gpu_type": "v100",
        "isolated_steps_per_s": {
            "Fam (batch size 16)": {"1": 10.0},
            "Fam (batch size 64)": {"1": 5.0, "4": 16.0},
            "Solo": {"1": 2.0},
        },
        "families": {
            "Fam": {"batches": [16, 64], "samples_per_s": [160.0, 320.0]},
            "Solo": {"batches": [], "samples_per_s": []},
        },
        "slowdowns": {"Fam (batch size 16)": {"Solo": 1.25}, "Solo": {"Fam (batch size 16)": 1.6}},
        "predictor": {
            "mu": math.log(1.5),
            "sensitivity": {"Fam (batch size 64)": 0.0, "Solo": 0.0},
            "intensity": {"Fam (batch size 64)": 0.0, "Solo": math.log(2.0)},
            "interaction": {"Fam": {"Solo": -math.log(2.0)}},
        },
        "conservative_slowdown": 2.0,
        "model_families": {"fammodel": "Fam", "solo_net": "Solo"},
        "memory": {
            "models": {"fammodel": {"batch": 64, "memory_mb": 3000, "activation_fraction": 0.5}},
            "families": {"Solo": {"batch": 1, "memory_mb": 1000, "activation_fraction": 0.2}},
            "fallback": {"memory_mb": 8000, "activation_fraction": 0.25},
        },
    }


@pytest.fixture
def small() -> TableProfile:
    return TableProfile(small_table())


# ---------------------------------------------------------------------------------- sub-batches
@pytest.mark.parametrize(
    ("batch", "floor", "expected"),
    [
        (128, 1, (128, 64, 32, 16, 8, 4, 2, 1)),
        (12, 1, (12, 4, 2, 1)),  # 12 = 4·3: 8 does not divide it
        (96, 8, (96, 32, 16, 8)),  # 96 = 32·3
        (6, 1, (6, 2, 1)),
        (1, 1, (1,)),
        (16, 32, (16,)),  # floor above B: only B itself
    ],
)
def test_sub_batches(small: TableProfile, batch: int, floor: int, expected: tuple[int, ...]) -> None:
    assert small.sub_batches(job("fammodel", batch), floor) == expected


@given(st.integers(1, 10_000), st.integers(1, 64))
def test_sub_batches_divide_and_decrease(batch: int, floor: int) -> None:
    subs = sub_batch_sizes(batch, floor)
    assert subs[0] == batch
    assert all(batch % b == 0 and b >= floor and (b & (b - 1)) == 0 for b in subs[1:])
    assert list(subs) == sorted(set(subs), reverse=True)


def test_sub_batches_reject_nonpositive_batch() -> None:
    with pytest.raises(ProfileError, match="at least 1"):
        sub_batch_sizes(0)


# ------------------------------------------------------------------------------- iteration time
def test_iter_time_interpolates_in_log_batch(small: TableProfile) -> None:
    j = job("fammodel", 64, iter_time_s=2.0)
    assert small.iter_time_s(j, 64) == 2.0  # b == B: exactly the trace's value
    # b = 16, a measured point: 2.0 s · 320/160 = 4.0 s
    assert small.iter_time_s(j, 16) == pytest.approx(4.0)
    # b = 32, halfway in log between 16 and 64: sps = √(160·320) = 226.27; 2.0 · 320/226.27 = 2.8284 (2√2)
    assert small.iter_time_s(j, 32) == pytest.approx(2.0 * math.sqrt(2.0))
    # b = 8, below the first point: step time flat, sps = 160·8/16 = 80; 2.0 · 320/80 = 8.0 s
    assert small.iter_time_s(j, 8) == pytest.approx(8.0)


def test_iter_time_clamps_above_the_largest_batch(small: TableProfile) -> None:
    # B = 256 and b = 128 are both above 64: sps stays 320, ratio 1
    assert small.iter_time_s(job("fammodel", 256, iter_time_s=3.0), 128) == pytest.approx(3.0)


def test_iter_time_memo_uses_each_jobs_own_iteration_time(small: TableProfile) -> None:
    # same (model, B, b) key, different trace iteration times: 1.0·2 and 5.0·2
    assert small.iter_time_s(job("fammodel", 64, 1.0), 16) == pytest.approx(2.0)
    assert small.iter_time_s(job("fammodel", 64, 5.0), 16) == pytest.approx(10.0)


def test_family_without_batch_sizes_and_unknown_model_have_flat_step_time(small: TableProfile) -> None:
    # no curve: a micro-step of b takes as long as one of B, so B/b micro-steps: 1.0 · 32/8 = 4.0
    assert small.iter_time_s(job("solo_net", 32), 8) == pytest.approx(4.0)
    assert small.iter_time_s(job("mystery-net", 32), 8) == pytest.approx(4.0)


def test_samples_per_s_empty_curve_is_proportional_to_batch() -> None:
    assert samples_per_s(((), ()), 8) == 8.0


def test_iter_time_rejects_zero_sub_batch(small: TableProfile) -> None:
    with pytest.raises(ProfileError, match="at least 1"):
        small.iter_time_s(job("fammodel", 64), 0)


# ---------------------------------------------------------------------------------------- memory
def test_memory_anchored_on_trace_memory(small: TableProfile) -> None:
    # fammodel: f = 0.5. Trace says 5000 MB at B = 64: static 2500, per sample 2500/64 = 39.0625
    j = job("fammodel", 64, memory_mb=5000.0)
    assert small.memory_mb(j, 64) == pytest.approx(5000.0)
    assert small.memory_mb(j, 16) == pytest.approx(2500 + 39.0625 * 16)  # 3125
    assert small.memory_mb(job("fammodel", 64, memory_mb=4000.0), 16) == pytest.approx(2000 + 500)


def test_memory_default_from_model_reference_batch(small: TableProfile) -> None:
    # fammodel default: 3000 MB at batch 64, f = 0.5: static 1500, per sample 1500/64 = 23.4375
    j = job("fammodel", 128)
    assert small.memory_mb(j, 128) == pytest.approx(1500 + 23.4375 * 128)  # 4500
    assert small.memory_mb(j, 32) == pytest.approx(1500 + 23.4375 * 32)  # 2250


def test_memory_family_and_fallback(small: TableProfile) -> None:
    # Solo family: 1000 MB at batch 1, f = 0.2: 800 + 200·b
    assert small.memory_mb(job("solo_net", 4), 2) == pytest.approx(1200.0)
    # unknown model: 8000 MB at its own batch, f = 0.25: 6000 + 2000·b/B
    assert small.memory_mb(job("mystery-net", 32), 32) == pytest.approx(8000.0)
    assert small.memory_mb(job("mystery-net", 32), 8) == pytest.approx(6500.0)


@pytest.mark.parametrize("bad", [0.0, -5.0, float("nan")])
def test_memory_rejects_nonpositive_trace_memory(small: TableProfile, bad: float) -> None:
    with pytest.raises(ProfileError, match="positive number of MB"):
        small.memory_mb(job("fammodel", 64, memory_mb=bad), 32)


# -------------------------------------------------------------------------------------- slowdown
def test_measured_pair_and_nearest_batch(small: TableProfile) -> None:
    a, b = job("fammodel", 64), job("solo_net", 8)
    # sub-batch 16 → "Fam (batch size 16)", measured with Solo: (1.25, 1.6)
    assert small.slowdown(a, 16, b, 8) == (1.25, 1.6)
    assert small.slowdown(b, 8, a, 16) == (1.6, 1.25)
    # sub-batch 20 is nearer 16 than 64 in log (ln 20/16 = 0.22 < ln 64/20 = 1.16): same pair
    assert small.slowdown(a, 20, b, 8) == (1.25, 1.6)
    assert small.job_type_for("fammodel", 40) == "Fam (batch size 64)"  # ln 64/40 = 0.47 < ln 40/16 = 0.92
    assert small.job_type_for("fammodel", 32) == "Fam (batch size 16)"  # exact tie in log → smaller


def test_unmeasured_pair_uses_predictor(small: TableProfile) -> None:
    a, b = job("fammodel", 64), job("solo_net", 8)
    # "Fam (batch size 64)" with Solo is not measured:
    # ξ_a = exp(ln 1.5 + 0 + ln 2 − ln 2) = 1.5; ξ_b = exp(ln 1.5 + 0 + 0 + 0) = 1.5 (no h for Solo|Fam)
    xa, xb = small.slowdown(a, 64, b, 8)
    assert xa == pytest.approx(1.5)
    assert xb == pytest.approx(1.5)


def test_predictor_never_below_one_and_unfitted_types() -> None:
    p = SlowdownPredictor(math.log(0.5), {"X": 0.0}, {"X": 0.0}, {})
    assert p.predict("X", "X") == 1.0  # exp(ln 0.5) = 0.5 → clamped to 1
    assert p.predict("X", "Y") is None


def test_unknown_family_gets_conservative_default(small: TableProfile) -> None:
    assert small.family_of("mystery-net") == UNKNOWN_FAMILY
    assert small.slowdown(job("mystery-net", 8), 8, job("fammodel", 64), 16) == (2.0, 2.0)
    # a fitted type paired with a type the predictor never saw: conservative too
    assert small.type_slowdown("Fam (batch size 16)", "Fam (batch size 64)") == (2.0, 2.0)


def test_isolated_throughput(small: TableProfile) -> None:
    assert small.isolated_throughput("Fam (batch size 64)", 4) == 16.0
    assert small.isolated_throughput("Fam (batch size 64)", 8) == pytest.approx(32.0)  # 16 · 8/4
    assert small.isolated_throughput("Fam (batch size 64)", 3) == pytest.approx(15.0)  # 5 · 3/1
    with pytest.raises(ProfileError, match="unknown Gavel job type"):
        small.isolated_throughput("Nope", 1)
    with pytest.raises(ProfileError, match="at least one GPU"):
        small.isolated_throughput("Solo", 0)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda t: t.pop("slowdowns"), "no 'slowdowns' section"),
        (lambda t: t.update(format="other/9"), "unsupported profile format"),
        (lambda t: t["families"]["Fam"].update(batches=[64, 16]), "batches must be increasing"),
        (lambda t: t["memory"]["fallback"].update(activation_fraction=1.5), "bad memory entry"),
        (lambda t: t["predictor"].pop("mu"), "malformed profile table"),
        (lambda t: t.update(conservative_slowdown=0.5), "must be ≥ 1"),
    ],
)
def test_malformed_table_is_rejected(mutate: Any, message: str) -> None:
    table = small_table()
    mutate(table)
    with pytest.raises(ProfileError, match=message):
        TableProfile(table)


def test_load_profile_errors(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="not found"):
        load_profile(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(bad)


# --------------------------------------------------------------------------------- shipped table
def test_shipped_mapping_of_trace_models() -> None:
    p = load_default_profile()
    assert p is load_default_profile()  # cached
    expected = {
        "vgg16": "ResNet-50",
        "vgg19": "ResNet-50",
        "resnet18": "ResNet-18",
        "shufflenet_v2_x1_0": "ResNet-18",
        "bert": "Transformer",
        "gpt2": "Transformer",
        "dqn": "A3C",
        "a2c": "A3C",
        "alexnet": "ResNet-18",
        "inception_v3": "ResNet-50",
        "mobilenet_v2": "ResNet-18",
        "resnet101": "ResNet-50",
        "ResNet-50 (batch size 64)": "ResNet-50",
        "ResNet-50": "ResNet-50",
        "A3C": "A3C",
        "CycleGAN": "CycleGAN",
        "LM": "LM",
        "Recommendation": "Recommendation",
        "Transformer": "Transformer",
        "vgg16 (batch size 32)": "ResNet-50",
        "no-such-model": UNKNOWN_FAMILY,
    }
    assert {m: p.family_of(m) for m in expected} == expected


def test_shipped_memory_defaults_are_the_sjfbsbf_figures() -> None:
    # data README: memory at the trace batch as profiled by the SJF-BSBF authors (MB)
    p = load_default_profile()
    figures = {
        ("resnet18", 128): 6432,
        ("shufflenet_v2_x1_0", 128): 5252,
        ("vgg16", 16): 4224,
        ("vgg19", 16): 4304,
        ("dqn", 128): 2230,
        ("a2c", 64): 2094,
        ("bert", 4): 8058,
        ("gpt2", 4): 10532,
    }
    for (model, batch), mb in figures.items():
        assert p.memory_mb(job(model, batch), batch) == pytest.approx(mb), model
        assert p.memory_mb(job(model, batch), 1) < mb  # smaller sub-batch, less memory


def test_shipped_table_is_small() -> None:
    assert DEFAULT_PROFILE_PATH.stat().st_size < 200_000
    text = DEFAULT_PROFILE_PATH.read_text(encoding="utf-8")
    assert "stanford-futuredata/gavel" in text and "SJF-BSBF" in text


def _gavel_v100(shared_data: Path) -> dict[str, Any]:
    return json.loads((shared_data / "profiles" / "gavel-throughputs.json").read_text(encoding="utf-8"))[
        "v100"
    ]


@pytest.mark.shared_data
def test_shipped_slowdown_matches_public_measurement(shared_data: Path) -> None:
    v100 = _gavel_v100(shared_data)
    a3c = v100["('A3C', 1)"]
    iso_a3c, iso_r18 = a3c["null"], v100["('ResNet-18 (batch size 16)', 1)"]["null"]
    co_a3c, co_r18 = a3c["('ResNet-18 (batch size 16)', 1)"]
    # by hand: 7.175767 / 5.573234 = 1.28754 (A3C slows down by 29 %); 32.353 / 32.353 = 1.0
    assert iso_a3c / co_a3c == pytest.approx(1.28754, rel=1e-5)
    p = load_default_profile()
    # a2c → A3C; resnet18 at sub-batch 16 → "ResNet-18 (batch size 16)"
    xa, xb = p.slowdown(job("a2c", 64), 64, job("resnet18", 128), 16)
    assert xa == pytest.approx(iso_a3c / co_a3c, rel=1e-4)
    assert xb == pytest.approx(iso_r18 / co_r18, rel=1e-4)


@pytest.mark.shared_data
def test_shipped_sub_batch_ratio_matches_public_measurement(shared_data: Path) -> None:
    v100 = _gavel_v100(shared_data)
    sps128 = v100["('ResNet-18 (batch size 128)', 1)"]["null"] * 128  # 17.995 steps/s · 128 = 2303.3
    sps64 = v100["('ResNet-18 (batch size 64)', 1)"]["null"] * 64  # 24.093 steps/s · 64 = 1542.0
    assert sps128 / sps64 == pytest.approx(1.4938, rel=1e-4)
    p = load_default_profile()
    # trace resnet18, B = 128, 0.779 s/iteration: at sub-batch 64 it takes 0.779 · 1.4938 = 1.1637 s
    assert p.iter_time_s(job("resnet18", 128, 0.779), 64) == pytest.approx(0.779 * sps128 / sps64, rel=1e-4)


@pytest.mark.shared_data
def test_shipped_isolated_throughput_matches_public_measurement(shared_data: Path) -> None:
    v100 = _gavel_v100(shared_data)
    p = load_default_profile()
    for key in ["('ResNet-50 (batch size 64)', 8)", "('CycleGAN', 1)", "('LM (batch size 80)', 4)"]:
        job_type, gpus = ast.literal_eval(key)
        assert p.isolated_throughput(job_type, gpus) == pytest.approx(v100[key]["null"], rel=1e-4)
    # A3C was measured on one GPU only: 16 GPUs → 16 × the one-GPU value (linear, ours)
    assert p.isolated_throughput("A3C", 16) == pytest.approx(16 * v100["('A3C', 1)"]["null"], rel=1e-4)


@pytest.mark.shared_data
def test_zero_entries_are_not_measured_and_use_the_predictor(shared_data: Path) -> None:
    v100 = _gavel_v100(shared_data)
    assert v100["('ResNet-50 (batch size 128)', 1)"]["('A3C', 1)"] == [0.0, 0.0]
    p = load_default_profile()
    assert p.measured_slowdown("ResNet-50 (batch size 128)", "A3C") is None
    xa, xb = p.type_slowdown("ResNet-50 (batch size 128)", "A3C")
    assert xa == p.predictor.predict("ResNet-50 (batch size 128)", "A3C")
    assert xa >= 1.0 and xb >= 1.0


# ------------------------------------------------------------------------------ import command
def _xi_from_model(types: list[str], mu: float, s: dict[str, float], g: dict[str, float]) -> dict:
    return {(a, b): math.exp(mu + s[a] + g[b]) for a in types for b in types}


def test_fit_predictor_recovers_a_held_out_pair_of_an_additive_model() -> None:
    types = ["F (batch size 1)", "F (batch size 2)", "F (batch size 4)", "F (batch size 8)"]
    s = dict(zip(types, [0.0, 0.2, 0.4, -0.1], strict=True))
    g = dict(zip(types, [0.1, 0.0, 0.3, 0.5], strict=True))
    xi = _xi_from_model(types, 0.3, s, g)
    held = (types[0], types[1])
    train = {p: v for p, v in xi.items() if p not in (held, held[::-1])}
    model = predictor_fit.fit_predictor(train, ridge=1e-9, tol=1e-12, max_sweeps=20_000)
    # truth: exp(0.3 + 0.0 + 0.0) = 1.34986; exp(0.3 + 0.2 + 0.1) = 1.82212
    assert model.predict(*held) == pytest.approx(math.exp(0.3), rel=1e-4)
    assert model.predict(*held[::-1]) == pytest.approx(math.exp(0.6), rel=1e-4)


def test_leave_pairs_out_is_exact_on_noise_free_data() -> None:
    types = [f"F (batch size {b})" for b in (1, 2, 4, 8, 16)]
    xi = _xi_from_model(types, 0.4, dict.fromkeys(types, 0.0), {t: 0.1 * i for i, t in enumerate(types)})
    rows = {r.method: r for r in predictor_fit.leave_pairs_out(xi, folds=5, ridge=1e-6)}
    assert rows["predictor"].mae < 0.002
    # the constant 2.0 is off by |2 − ξ| on average, which is far from 0 here (ξ from 1.49 to 2.23)
    assert rows["conservative default (2)"].mae > 0.2


@pytest.mark.shared_data
def test_import_round_trip_reproduces_the_shipped_table(shared_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    src = shared_data / "profiles" / "gavel-throughputs.json"
    assert import_gavel.main(["--src", str(src), "--out", str(out), "--folds", "2"]) == 0
    fresh = json.loads(out.read_text(encoding="utf-8"))
    shipped = json.loads(DEFAULT_PROFILE_PATH.read_text(encoding="utf-8"))
    for section in ("isolated_steps_per_s", "families", "slowdowns", "model_families", "memory"):
        assert fresh[section] == shipped[section], section  # the shipped table is not stale
    # 636 measured ordered pairs on one V100 (data README), all ξ ≥ 1
    values = [x for row in fresh["slowdowns"].values() for x in row.values()]
    assert len(values) == 636 and min(values) >= 1.0
    assert str(shared_data) not in out.read_text(encoding="utf-8")
    assert load_profile(out).slowdown(job("bert", 4), 4, job("bert", 4), 4)[0] >= 1.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "source file not found"),
        ("{oops", "is not valid JSON"),
        ('{"k80": {}}', "no 'v100' section"),
        ('{"v100": {"ResNet": {"null": 1.0}}}', "bad job key"),
        ('{"v100": {"(\'A\', 1)": {"null": 1.0, "(\'A\', 1)": [1.0]}}}', "expected \\[steps/s, steps/s\\]"),
        ('{"v100": {"(\'A\', 1)": {"null": 1.0, "(\'A\', 1)": [0.0, 0.0]}}}', "no measured single-GPU pair"),
        ('{"v100": {"(\'A\', 1)": {"null": NaN}}}', "no isolated throughput"),
        ('{"v100": {"(\'A\', 1)": {"null": 1.0, "(\'A\', 1)": [-1.0, 2.0]}}}', "expected \\[steps/s"),
    ],
)
def test_import_bad_source_gives_a_message_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    src = tmp_path / "gavel.json"
    if content is not None:
        src.write_text(content, encoding="utf-8")
    out = tmp_path / "out.json"
    assert import_gavel.main(["--src", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert "Traceback" not in err
    assert re.search(message, err)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == ([src] if content is not None else [])


def test_import_binary_source_gives_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "gavel.json"
    src.write_bytes(b"\xff\xfe\x00garbage")
    assert import_gavel.main(["--src", str(src), "--out", str(tmp_path / "out.json")]) == 2
    assert "is not UTF-8 text" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.shared_data
def test_validate_lucid_compares_with_gavel_measurements(shared_data: Path, tmp_path: Path) -> None:
    v100 = _gavel_v100(shared_data)
    r18 = v100["('ResNet-18 (batch size 16)', 1)"]
    xi_r18 = r18["null"] / r18["('CycleGAN', 1)"][0]
    xi_gan = v100["('CycleGAN', 1)"]["null"] / r18["('CycleGAN', 1)"][1]
    # one Lucid row: ResNet18 (→ ResNet-18, batch 16) at 0.5 of its solo speed (ξ = 2.0) with DCGAN
    # (→ CycleGAN) at 0.8 (ξ = 1.25); an AMP row and a PointNet row are skipped
    lucid = tmp_path / "lucid.csv"
    header = (
        ",model1,dataset1,gpu_num1,batchsize1,amp1,speed1,model2,dataset2,gpu_num2,batchsize2,amp2,speed2\n"
    )
    lucid.write_text(
        header
        + "0,ResNet18,CIFAR-10,1,16,0,0.5,DCGAN,LSUN,1,64,0,0.8\n"
        + "1,ResNet18,CIFAR-10,1,16,1,0.5,DCGAN,LSUN,1,64,0,0.8\n"
        + "2,PointNet,ShapeNet,1,32,0,0.9,DCGAN,LSUN,1,64,0,0.8\n",
        encoding="utf-8",
    )
    text = validate_lucid(lucid, load_default_profile())
    assert "1 fp32 pairs (2 rows skipped)" in text
    mae = (abs(xi_r18 - 2.0) + abs(xi_gan - 1.25)) / 2
    line = next(row for row in text.splitlines() if row.startswith("Gavel table + predictor"))
    assert float(line.split()[5]) == pytest.approx(mae, abs=1e-3)


@given(
    st.sampled_from(["vgg16", "resnet18", "bert", "gpt2", "a2c", "alexnet", "ResNet-50", "LM", "mystery"]),
    st.sampled_from([1, 4, 16, 64, 128, 256, 2048]),
    st.one_of(st.none(), st.floats(100.0, 40_000.0)),
)
def test_shipped_profile_invariants(model: str, batch: int, memory: float | None) -> None:
    p = load_default_profile()
    j = job(model, batch, iter_time_s=0.25, memory_mb=memory)
    subs = p.sub_batches(j)
    assert p.iter_time_s(j, batch) == 0.25  # b = B: the trace's own time, exactly
    mems = [p.memory_mb(j, b) for b in subs]
    assert mems == sorted(mems, reverse=True)  # less memory at smaller sub-batches
    assert all(m > 0 for m in mems)
    if memory is not None:
        assert mems[0] == pytest.approx(memory)
    xa, xb = p.slowdown(j, subs[-1], job("vgg19", 16), 16)
    assert xa >= 1.0 and xb >= 1.0
