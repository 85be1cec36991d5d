"""``--preset`` and the baselines'/fidelity options of ``python -m scheduling.sim``: the report
records them, an explicit option wins over the preset, bad values are one-line errors (exit 2),
and without them the report has none of the new keys."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from scheduling.sim.cli import build_parser
from scheduling.sim.fidelity import MURI_TESTBED
from scheduling.sim.fidelity_cli import resolve
from tests.unit.test_sim_cli import TINY, run_cli


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.csv"
    path.write_text(TINY, encoding="utf-8")
    return path


def report(args: list[str], trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    out = tmp_path / "out.json"
    code, text, err = run_cli(
        ["--trace", str(trace_path), "--cluster", "1x2", "--no-progress", "--json", str(out), *args], capsys
    )
    assert code == 0, err
    return {**json.loads(out.read_text()), "_table": text}


def test_default_run_has_no_new_keys(trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = report(["--policies", "fifo"], trace, tmp_path, capsys)
    assert set(r["config"]) == {"round_interval_s", "round_on_events", "restart_cost_s", "seed"}
    assert set(r["scheduler"]) == {"starvation_bound_s", "aging_s", "reclaim", "borrow_bound_s"}
    assert r["config"]["round_interval_s"] == 60 and r["config"]["restart_cost_s"] == 30
    assert "fidelity:" not in r["_table"]


def test_preset_muri_testbed(trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = report(["--policies", "srtf,tiresias", "--preset", "muri-testbed"], trace, tmp_path, capsys)
    assert r["config"]["round_interval_s"] == 360 and r["config"]["restart_cost_s"] == 0
    assert r["config"]["fidelity"] == {
        "iteration_time_factor": 1.015,
        "first_start_overhead": "muri-testbed",
        "relaunch_overhead": "muri-testbed",
        "replan": "on-change",
        "rounds_at_horizon": False,
        "percentile": "index",
        "charge": "launch",
    }
    assert r["scheduler"]["placement"] == "consolidated"
    assert r["scheduler"]["tiresias"] == {
        "thresholds": [3250.0, 7200.0],
        "service": "gpu_s",
        "starvation_guard": False,
        "starvation_factor": 1.0,
        "demoted": "back",
    }
    assert "tiresias: thresholds 3250, 7200 GPU-s; guard off; demoted jobs back" in r["_table"]
    # SRTF on 1x2, rounds at 0, 360, ...: job 2 (dqn, 2 GPUs, 10 its) first: 19.7 s to launch +
    # 10 x 1.015 s -> ends 29.85. At 360 (a completion since) jobs 1 (vgg16: 17.1 + 50.75) and 0
    # (resnet18: 22.6 + 101.5) start: ends 427.85 and 484.1.
    assert r["policies"]["srtf"]["avg_jct_s"] == pytest.approx((29.85 + 427.85 + 484.1) / 3)


def test_preset_muri_sim_rounds_on_events(
    trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = report(["--policies", "fifo", "--preset", "muri-sim"], trace, tmp_path, capsys)
    assert r["config"]["round_interval_s"] is None and r["config"]["round_on_events"] is True
    assert "rounds on events" in r["_table"]


def test_options_win_over_the_preset() -> None:
    parser = build_parser()
    base = ["--trace", "x", "--cluster", "1x1", "--preset", "muri-testbed"]
    chosen = resolve(parser.parse_args(base))
    assert chosen.round_interval_s == 360 and chosen.fidelity.relaunch is MURI_TESTBED
    chosen = resolve(
        parser.parse_args(
            [*base, "--round-interval", "60", "--relaunch-overhead", "0", "--tiresias-guard", "on"]
            + ["--tiresias-thresholds", "700", "--tiresias-service", "wall_s", "--placement", "spread"]
        )
    )
    assert chosen.round_interval_s == 60 and chosen.fidelity.relaunch.seconds is not None
    assert chosen.fidelity.relaunch.name == "0" and chosen.fidelity.first_start is MURI_TESTBED
    assert chosen.tiresias.starvation_guard and chosen.tiresias.thresholds == (700.0,)
    assert chosen.tiresias.service == "wall_s" and chosen.placement == "spread"
    ours = resolve(parser.parse_args(["--trace", "x", "--cluster", "1x1"]))
    assert (ours.round_interval_s, ours.restart_cost_s, ours.round_on_events) == (60.0, 30.0, False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--round-interval", "inf"],
            "error: --round-interval inf needs --round-on-events: with no periodic round, the only "
            "rounds are those at arrivals and completions\n",
        ),
        (["--round-interval", "0"], "error: round interval must be a positive number of s, got 0.0\n"),
        (["--relaunch-overhead", "slow"], "unknown overhead table 'slow'"),
        (["--tiresias-thresholds", "700,300"], "increasing"),
        (["--iteration-time-factor", "0"], "iteration-time factor"),
    ],
)
def test_bad_values_are_one_line_errors(
    args: list[str],
    message: str,
    trace: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_cli(["--trace", str(trace), "--cluster", "1x2", "--no-progress", *args], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_inf_interval_with_events_is_accepted() -> None:
    chosen = resolve(
        build_parser().parse_args(["--trace", "x", "--cluster", "1x1", "--round-interval", "inf"])
    )
    assert math.isinf(chosen.round_interval_s)
