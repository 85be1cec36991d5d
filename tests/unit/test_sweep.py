"""Sweeps in parallel (scheduling/sim/sweep.py): the same results, in the same order, as a serial run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scheduling.sim import sweep

ROOT = Path(__file__).resolve().parents[2]


def slow_square(n: int) -> int:
    """n², the earlier tasks finishing last (so completion order differs from task order)."""
    time.sleep(0.02 * (5 - n))
    return n * n


def fail_on_three(n: int) -> int:
    if n == 3:
        raise ValueError("three")
    return n


def test_processes_return_results_in_task_order() -> None:
    tasks = [0, 1, 2, 3, 4]
    assert sweep.run_tasks(slow_square, tasks, workers=2, progress=False) == [0, 1, 4, 9, 16]
    assert sweep.run_tasks(slow_square, tasks, workers=1, progress=False) == [0, 1, 4, 9, 16]


def test_no_tasks_is_an_empty_list() -> None:
    assert sweep.run_tasks(slow_square, [], workers=2, progress=False) == []


def test_a_task_error_is_raised_to_the_caller() -> None:
    with pytest.raises(ValueError, match="three"):
        sweep.run_tasks(fail_on_three, [1, 2, 3, 4], workers=2, progress=False)


def test_workers_below_one_is_a_one_line_error() -> None:
    with pytest.raises(sweep.SweepError, match="--workers must be at least 1, got 0"):
        sweep.run_tasks(slow_square, [1], workers=0, progress=False)


def test_workers_below_one_is_refused_before_the_trace_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The trace does not exist: were --workers checked only when the sweep starts, the error
    # would be about the trace (after loading it, for a real one).
    from scheduling.sim.cli import main

    missing = str(tmp_path / "missing.csv")
    with pytest.raises(SystemExit) as stop:
        main(["--trace", missing, "--cluster", "4x8", "--workers", "0", "--no-progress"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --workers: must be at least 1, got 0" in err


def test_dask_without_distributed_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed → ImportError
    with pytest.raises(sweep.SweepError, match=r"pip install -r requirements-dask\.txt"):
        sweep.run_tasks(slow_square, [1], dask="tcp://127.0.0.1:1", progress=False)


def test_default_workers_is_the_cores_this_process_may_use() -> None:
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert sweep.default_workers() == expected


def test_on_a_local_dask_cluster_results_are_the_serial_ones() -> None:
    distributed = pytest.importorskip("distributed")  # the optional extra (requirements-dask.txt)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False) as cluster:
        got = sweep.run_tasks(slow_square, [0, 1, 2, 3, 4], dask=cluster.scheduler_address, progress=False)
    assert got == [0, 1, 4, 9, 16]


@pytest.mark.shared_data
def test_fairness_table_serial_and_two_workers_agree(shared_data: Path, tmp_path: Path) -> None:
    """The whole table (ρ per tenant, usage, violations) on a 40-job slice; CPU seconds aside."""
    reports = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}.json"
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "fairness_table.py"), "--max-jobs", "40"]
            + ["--no-progress", "--workers", str(workers), "--json", str(out)],
            check=True,
            capture_output=True,
            cwd=ROOT,
            env={**os.environ, "SHAREWISE_DATA_DIR": str(shared_data)},
        )
        report = json.loads(out.read_text())
        for trace in report:
            for row in trace["rows"].values():
                row.pop("cpu_s")
        reports.append(report)
    assert [t["jobs"] for t in reports[0]] == [40, 40]
    assert len(reports[0][0]["rows"]) == 6  # five policies with quotas and the reference without
    assert reports[0] == reports[1]


def test_simulator_cli_serial_and_two_workers_agree(tmp_path: Path) -> None:
    """``python -m scheduling.sim`` over three policies, with quotas and learning: the same report."""
    from scheduling.sim.cli import main

    # Six jobs (iteration_time in ms): 1-2 GPUs, 10-210 iterations of 0.5-1 s, one every 30 s.
    models = ("resnet18", "vgg16")
    rows = [(i, 1 + i % 2, 30 * i, 10 + 40 * i, models[i % 2], 500 + 100 * i) for i in range(6)]
    trace = tmp_path / "six.csv"
    trace.write_text(
        "job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,"
        "iteration_time,resource_time_0,resource_time_1,resource_time_2,priority\n"
        + "".join(f"{i},{g},{t},{n},{m},64,0,0,{ms},0,0,0,0\n" for i, g, t, n, m, ms in rows),
        encoding="utf-8",
    )
    reports = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}.json"
        args = ["--trace", str(trace), "--cluster", "1x2", "--policies", "fifo,tiresias,sjf-bsbf"]
        args += ["--quotas", "demand", "--prior-error", "0.2", "--learn", "--no-progress"]
        assert main([*args, "--workers", str(workers), "--json", str(out)]) == 0
        reports.append(json.loads(out.read_text()))
    assert set(reports[0]["policies"]) == {"fifo", "tiresias", "sjf-bsbf"}
    assert all((p["jobs"], p["unfinished"]) == (6, 0) for p in reports[0]["policies"].values())
    assert reports[0] == reports[1]
