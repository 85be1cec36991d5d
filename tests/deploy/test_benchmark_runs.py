"""The simulator benchmarks the README and docs name run to the end on the smallest input they
allow (the 61-job testbed trace, one policy or run where they take one), so a crash whatever the
arguments (as ``nodes, per_node = parse_cluster(...)`` once was, after ``parse_cluster`` began
returning node groups) fails the suite, not the first reader. Each run is a subprocess bounded
by a timeout; skipped, with the reason, where the public traces are absent."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACE = "sjfbsbf-testbed-61.csv"

#: Where the public traces are needed: the conftest's ``shared_data`` fixture skips, with the
#: reason, when the data folder is absent.
needs_trace = pytest.mark.usefixtures("shared_data")


def run_benchmark(
    *argv: str, timeout_s: float = 60.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/<argv>`` from the repository root (``env`` added to this process's
    environment), its output captured."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


@needs_trace
def test_eta_accuracy_runs_as_docs_api_gives_it() -> None:
    result = run_benchmark("benchmarks/eta_accuracy.py", "--policies", "sjf-bsbf")
    assert result.returncode == 0, result.stderr
    assert "trace sjfbsbf-testbed-61.csv, cluster 4x8" in result.stdout
    assert "sjf-bsbf " in result.stdout and "of 61" in result.stdout


@needs_trace
def test_bench_sim_runs_on_the_small_trace() -> None:
    result = run_benchmark(
        "benchmarks/bench_sim.py", "--trace", TRACE, "--cluster", "4x8", "--runs", "1", "--policies", "fifo"
    )
    assert result.returncode == 0, result.stderr
    assert "cluster 4x8 (32 GPUs)" in result.stdout
    assert "fifo" in result.stdout and " 61 " in result.stdout  # 61 jobs finished


@needs_trace
def test_gains_table_runs_as_the_readme_gives_it() -> None:
    result = run_benchmark(
        "benchmarks/gains_table.py",
        "--traces",
        f"{TRACE}:4x8",
        "--presets",
        "ours",
        "--workers",
        "1",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    rows = [
        line for line in result.stdout.splitlines() if line.startswith("| sjfbsbf-testbed-61 | 4x8 | ours |")
    ]
    assert len(rows) == 2  # the shipped and the strict profile


@needs_trace
def test_learning_table_runs_on_the_small_trace() -> None:
    """The four modes on the 61-job testbed trace. Learning over the exact prior without
    measurement noise only ever hears the truth it already believes, so its decisions — and the
    average JCT — are the oracle's (a gap of +0.0 %); the prior-only row is off the oracle."""
    result = run_benchmark(
        "benchmarks/learning_table.py", "--only", "testbed", "--seeds", "0", "--workers", "1", "--no-progress"
    )
    assert result.returncode == 0, result.stderr
    rows = {
        line[9:31].strip(): line.split()
        for line in result.stdout.splitlines()
        if line.startswith("testbed  ")
    }
    assert sorted(rows) == ["learning", "learning, exact prior", "oracle", "prior only"]
    # columns from the end: CPU s, reports, ξ MAPE last/first tenth, regretted, shares, vs oracle, avg JCT
    exact, oracle = rows["learning, exact prior"], rows["oracle"]
    assert exact[-8:-4] == oracle[-8:-4]  # average JCT, gap, share decisions, regretted
    assert oracle[-7] == "+0.0%" and oracle[-5] == "0"  # the oracle regrets nothing
    assert rows["prior only"][-7] != "+0.0%"


@pytest.mark.parametrize("argv", [["--seeds", "x"], ["--seeds", ","], ["--error", "1"], ["--noise", "-1"]])
def test_learning_tables_bad_arguments_are_one_line_and_exit_2(argv: list[str]) -> None:
    result = run_benchmark("benchmarks/learning_table.py", *argv)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("learning_table.py: error: ")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("script", ["bench_sim.py", "eta_accuracy.py", "bench_scaling.py"])
def test_a_bad_cluster_is_one_line_and_exit_2(script: str) -> None:
    result = run_benchmark(f"benchmarks/{script}", "--cluster", "4y8")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: bad --cluster '4y8': cluster shape must look like NODESxGPUS, e.g. 4x8; got '4y8'"
    ]


def test_gains_tables_bad_shape_is_one_line_and_exit_2() -> None:
    result = run_benchmark("benchmarks/gains_table.py", "--traces", f"{TRACE}:4y8", "--workers", "1")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: bad --cluster '4y8': cluster shape must look like NODESxGPUS, e.g. 4x8; got '4y8'"
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["eta_accuracy.py"],
        ["bench_sim.py", "--trace", TRACE, "--cluster", "4x8"],
        ["gains_table.py", "--traces", f"{TRACE}:4x8", "--workers", "1"],
        ["bench_scaling.py"],
        ["learning_table.py", "--only", "testbed", "--workers", "1"],
    ],
)
def test_an_absent_data_folder_is_one_line_and_exit_2(argv: list[str], tmp_path: Path) -> None:
    """Where the public traces are not: the loader's message (it names SHAREWISE_DATA_DIR), no
    traceback."""
    argv[0] = f"benchmarks/{argv[0]}"
    result = run_benchmark(*argv, env={"SHAREWISE_DATA_DIR": str(tmp_path / "absent")})
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: trace not found: {tmp_path / 'absent' / 'traces'}/")
    assert "SHAREWISE_DATA_DIR" in line


def test_bench_kueue_states_the_jobs_it_writes_and_refuses_a_folder_in_one_line(tmp_path: Path) -> None:
    """``--jobs 90`` is 120 jobs (30 tenants × 2 small + 1 medium + 1 large, by hand), as the
    help says; a folder as ``--write-trace`` is one line and exit 2, not IsADirectoryError."""
    help_text = " ".join(run_benchmark("benchmarks/bench_kueue.py", "--help").stdout.split())
    assert "at least 90 jobs (--jobs 90 gives 120)" in help_text
    out = tmp_path / "kueue.csv"
    result = run_benchmark("benchmarks/bench_kueue.py", "--jobs", "90", "--write-trace", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"wrote 120 jobs to {out}"]
    assert len(out.read_text().splitlines()) == 1 + 120
    result = run_benchmark("benchmarks/bench_kueue.py", "--jobs", "90", "--write-trace", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: cannot write {tmp_path}: Is a directory"]


def test_bench_kueue_stopped_early_states_no_nan() -> None:
    """A run stopped by ``--timeout`` before (nearly) any job finished: no "nan s, nan jobs/s" and
    no CPU "per finished job" divided by a job that did not finish (it printed both)."""
    result = run_benchmark("benchmarks/bench_kueue.py", "--jobs", "90", "--timeout", "1", timeout_s=120)
    assert result.returncode == 1, result.stderr  # not all finished
    assert not re.search(r"\bnan\b", result.stdout)
    finished = int(result.stdout.split("NOT all finished: ")[1].split("/")[0])
    assert ("no job finished within the run" in result.stdout) == (finished == 0)
    assert ("CPU per finished job" in result.stdout) == (finished > 0)
