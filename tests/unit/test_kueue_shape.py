"""The Kueue-shaped benchmark's workload has the shape of Kueue's baseline scheduler performance
test (5 cohorts × 6 queues; per queue 350 small, 100 medium, 50 large workloads; 15,000 in all)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import kueue_shape as shape  # noqa: E402  # benchmarks/kueue_shape.py


def test_the_full_scenario_has_kueues_counts_per_class_and_tenant() -> None:
    jobs = shape.kueue_workload()
    assert len(jobs) == 15_000 == 5 * 6 * (350 + 100 + 50)
    per = Counter((j.tenant, shape.class_of(j.gpus)) for j in jobs)
    tenants = shape.tenant_names()
    assert len(tenants) == 30 and len({t.split("-cq-")[0] for t in tenants}) == 5
    assert per == {(t, c): n for t in tenants for c, n in (("small", 350), ("medium", 100), ("large", 50))}
    # runtimes 0.2 / 0.5 / 1 s on 1 / 5 / 20 GPUs, priorities in Kueue's order
    by_class = {shape.class_of(j.gpus): j for j in jobs}
    assert {c: round(j.iterations * j.iter_time_s, 9) for c, j in by_class.items()} == {
        "small": 0.2,
        "medium": 0.5,
        "large": 1.0,
    }
    assert by_class["small"].priority < by_class["medium"].priority < by_class["large"].priority
    # 39,600 GPU-seconds of work (30 × (350·0.2·1 + 100·0.5·5 + 50·1·20)): 66 s on 600 GPUs
    assert sum(j.gpus * j.iterations * j.iter_time_s for j in jobs) == pytest.approx(39_600)
    assert shape.NODES * shape.GPUS_PER_NODE == 30 * shape.NOMINAL_GPUS == 600


def test_arrivals_follow_each_streams_interval() -> None:
    jobs = shape.kueue_workload()
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)
    assert [j.id for j in jobs] == list(range(15_000))
    large = [j.submit_time for j in jobs if j.tenant == "cohort-4-cq-5" and j.gpus == 20]
    assert large == pytest.approx([1.2 * k for k in range(1, 51)])  # the last at 60 s
    assert max(j.submit_time for j in jobs if j.gpus == 1) == pytest.approx(35.0)


def test_a_tenth_keeps_the_proportions() -> None:
    assert shape.scaled_counts(1_500) == {"small": 35, "medium": 10, "large": 5}
    assert len(shape.kueue_workload(1_500)) == 30 * 50
    assert shape.scaled_counts(1) == {"small": 1, "medium": 1, "large": 1}
    with pytest.raises(ValueError):
        shape.scaled_counts(0)


def test_run_as_a_script_it_prints_the_workloads_summary_and_writes_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python benchmarks/kueue_shape.py`` used to fail (the project's packages not on the path);
    its figures are the module docstring's, by hand: 350 + 100 + 50 a queue over 30 queues;
    350·0.2·1 + 100·0.5·5 + 50·1·20 = 1,320 GPU-seconds a queue, 39,600 in all, ÷ 600 GPUs = 66 s;
    the last arrival the 50th large job at 50 × 1.2 = 60 s."""
    out = tmp_path / "kueue.csv"
    assert shape.main(["--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "15,000 jobs of 30 tenants (5 groups of 6)",
        "small: 350 a tenant, 10,500 in all, 1 GPU(s), 0.2 s each, one every 0.1 s, priority 25",
        "medium: 100 a tenant, 3,000 in all, 5 GPU(s), 0.5 s each, one every 0.5 s, priority 50",
        "large: 50 a tenant, 1,500 in all, 20 GPU(s), 1 s each, one every 1.2 s, priority 100",
        "arrivals from 0.1 s to 60 s",
        "work: 39,600 GPU-seconds on 600 GPUs (30 nodes x 20): at least 66.0 s of pure run time",
        f"wrote 15,000 jobs to {out}",
    ]
    rows = out.read_text().splitlines()
    assert rows[0] == "job_id,user,num_gpu,submit_time,iterations,model_name,duration"
    assert len(rows) == 1 + 15_000


def test_the_count_is_the_per_tenant_minimum_times_30_as_the_help_says() -> None:
    """By hand: --jobs 90 → small round(350·90/15,000) = round(2.1) = 2, medium round(0.6) = 1,
    large max(1, round(0.3)) = 1: 30 × 4 = 120; --jobs 1 and 10 → one of each, 30 × 3 = 90."""
    assert shape.MIN_JOBS == 90
    assert shape.total_jobs(90) == len(shape.kueue_workload(90)) == 120
    assert shape.total_jobs(1) == shape.total_jobs(10) == len(shape.kueue_workload(10)) == 90
    assert shape.total_jobs(15_000) == 15_000
    assert "at least 90 jobs (--jobs 90 gives 120)" in shape.JOBS_HELP


@pytest.mark.parametrize("where", ["missing/dir/x.csv", "."])
def test_an_out_that_cannot_be_written_is_one_line_and_exit_2(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing folder (FileNotFoundError) or a folder (IsADirectoryError): no traceback, no
    summary, one line naming the path and the reason."""
    out = tmp_path / where
    assert shape.main(["--jobs", "90", "--out", str(out)]) == 2
    said = capsys.readouterr()
    reason = "No such file or directory" if where != "." else "Is a directory"
    assert said.out == ""
    assert said.err.splitlines() == [f"error: cannot write {out}: {reason}"]


def test_a_closed_pipe_ends_it_quietly() -> None:
    """``kueue_shape.py | head`` where head has gone: no BrokenPipeError traceback (stdout is a
    pipe whose reading end is closed before the script writes, so its first write fails)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, str(Path(shape.__file__)), "--jobs", "90"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 1
