"""``python -m scheduling.sim`` names the trace's models the profile does not know (one warning
line on stderr): their jobs run at the trace's iteration time but never share a GPU, since no
slowdown is known for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduling.sim.cli import main
from tests.unit.test_sim_cli import HEADER, TINY, run_cli

# Two jobs of a made-up model and one resnet18, all at t=0 on one GPU (iteration_time in ms).
UNKNOWN = HEADER + (
    "0,1,0,100,frobnicator_9000,64,0,0,1000,0,0,0,0\n"
    "1,1,0,50,frobnicator_9000,64,0,0,1000,0,0,0,0\n"
    "2,1,0,50,resnet18,128,0,0,1000,0,0,0,0\n"
)


def test_unknown_models_are_named_and_never_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "unknown.csv"
    trace.write_text(UNKNOWN, encoding="utf-8")
    out = tmp_path / "report.json"
    argv = ["--trace", str(trace), "--cluster", "1x1", "--policies", "sjf-bsbf", "--no-progress"]
    code, _, err = run_cli([*argv, "--json", str(out)], capsys)
    assert code == 0
    assert err.splitlines()[0] == (
        "warning: the profile knows no model of 2 jobs: frobnicator_9000 (2); they never share a GPU "
        "(no slowdown is known for them) and their memory is the profile's fallback guess"
    )
    summary = json.loads(out.read_text(encoding="utf-8"))["policies"]["sjf-bsbf"]
    assert summary["shared_gpu_time_frac"] == 0.0 and summary["unfinished"] == 0


def test_known_models_give_no_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "tiny.csv"
    trace.write_text(TINY, encoding="utf-8")
    assert main(["--trace", str(trace), "--cluster", "1x2", "--no-progress"]) == 0
    assert "profile knows no model" not in capsys.readouterr().err
