"""Input the command refuses before sending anything (numbers JSON cannot carry, values of types
it has no form for, malformed options: one line, exit status 2), YAML's unquoted dates read as the
text written, and commands naming several jobs going on past one that fails."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sharewise import Client, UsageError
from sharewise.jobfile import read_yaml

from cluster.models import Job
from tests.client.conftest import Result, Service

Run = Callable[..., Result]

JOB_YAML = """\
name: steps
model: resnet50
batch_size: 32
iterations: 20
gpus: 1
"""


def job_file(tmp_path: Path, extra: str = "", name: str = "job.yaml", text: str = JOB_YAML) -> str:
    path = tmp_path / name
    path.write_text(text + extra)
    return str(path)


def submitted(result: Result) -> int:
    assert result.code == 0, result.err
    return int(result.out.split()[2])  # "Submitted job 12 (name), pending"


def one_line_usage_error(result: Result) -> str:
    """The single line of a usage error (exit status 2), with nothing sent."""
    assert result.code == 2, (result.code, result.err)
    lines = result.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("sharewise: error: "), result.err
    assert result.out == "" and Job.objects.count() == 0
    return lines[0]


# ------------------------------------------------------------------ numbers JSON cannot carry


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "Infinity"])
def test_a_non_finite_flag_is_a_usage_error_naming_it(run: Run, tmp_path: Path, value: str) -> None:
    line = one_line_usage_error(run("submit", job_file(tmp_path), "--iteration-time-s", value))
    assert "'--iteration-time-s'" in line and "not a finite number" in line


@pytest.mark.parametrize(
    ("extra", "field", "shown"),
    [
        ("iteration_time_s: .inf\n", "iteration_time_s", "inf"),
        ("iteration_time_s: -.inf\n", "iteration_time_s", "-inf"),
        ("iteration_time_s: .nan\n", "iteration_time_s", "nan"),
        ("iteration_time_s: 1.0e+400\n", "iteration_time_s", "inf"),  # past the largest double
        ("gpu_memory_mb: .NaN\n", "gpu_memory_mb", "nan"),
    ],
)
def test_a_non_finite_number_in_a_job_file_is_a_usage_error_naming_it(
    run: Run, tmp_path: Path, extra: str, field: str, shown: str
) -> None:
    path = job_file(tmp_path, extra)
    assert one_line_usage_error(run("submit", path)) == (
        f"sharewise: error: job file {path}: {field} must be a finite number, got {shown}"
    )


def test_non_finite_numbers_in_json_files_and_set_are_usage_errors(run: Run, tmp_path: Path) -> None:
    # Python's json module reads NaN and Infinity, which JSON itself does not have
    path = job_file(tmp_path, name="job.json", text='{"name": "j", "iteration_time_s": Infinity}')
    assert one_line_usage_error(run("submit", path)).endswith(
        f"job file {path}: iteration_time_s must be a finite number, got inf"
    )
    line = one_line_usage_error(run("submit", job_file(tmp_path), "--set", "priority=.nan"))
    assert line == "sharewise: error: --set: priority must be a finite number, got nan"
    jobs = job_file(tmp_path, name="jobs.yaml", text="- name: a\n- name: b\n  gpus: .inf\n")
    assert one_line_usage_error(run("submit-many", jobs)).endswith(
        f"jobs file {jobs}, job 1: gpus must be a finite number, got inf"
    )


def test_a_key_given_twice_in_a_job_file_is_a_usage_error_naming_it(run: Run, tmp_path: Path) -> None:
    # PyYAML and json keep the last value: `name:` twice was submitted as the second, unnoticed
    path = job_file(tmp_path, "name: again\n")
    assert one_line_usage_error(run("submit", path)) == (
        f"sharewise: error: job file {path}: invalid YAML at line 6: key 'name' given twice"
        " (lines 1 and 6); give it once"
    )
    path = job_file(tmp_path, name="job.json", text='{"name": "j", "gpus": 1, "gpus": 2}')
    assert one_line_usage_error(run("submit", path)) == (
        f"sharewise: error: job file {path}: invalid JSON: key 'gpus' given twice; give it once"
    )
    jobs = job_file(tmp_path, name="jobs.yaml", text="- name: a\n- {name: b, gpus: 1, gpus: 2}\n")
    assert one_line_usage_error(run("submit-many", jobs)) == (
        f"sharewise: error: job file {jobs}: invalid YAML at line 2: key 'gpus' given twice (line 2);"
        " give it once"
    )
    # a key a `<<` merge brings in may still be overridden, as YAML means it
    assert read_yaml("base: &b {name: x}\njob:\n  <<: *b\n  name: y\n")["job"] == {"name": "y"}
    assert not Job.objects.exists()


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_watch_refuses_a_non_finite_interval(run: Run, value: str) -> None:
    line = one_line_usage_error(run("watch", "--interval", value, "--count", "2"))
    assert "'--interval'" in line and "not a finite number" in line


def test_the_python_api_refuses_non_finite_numbers_and_dates_by_field(service: Service) -> None:
    job = {"name": "api", "model": "resnet50", "batch_size": 8, "iterations": 1, "gpus": 1}
    with Client(service.url, service.alice, retries=0) as client:
        with pytest.raises(UsageError, match=r"^job: iteration_time_s must be a finite number, got nan$"):
            client.submit({**job, "iteration_time_s": float("nan")})
        with pytest.raises(UsageError, match=r"^job 1: name is a date \(2026-12-01\)"):
            client.submit_many([job, {**job, "name": datetime.date(2026, 12, 1)}])
    assert Job.objects.count() == 0


# ------------------------------------------------------------------ dates and other types


def test_an_unquoted_date_is_read_as_the_text_written(run: Run, tmp_path: Path) -> None:
    path = job_file(tmp_path, text=JOB_YAML.replace("name: steps", "name: 2026-12-01"))
    assert Job.objects.get(pk=submitted(run("submit", path))).name == "2026-12-01"
    set_name = run("submit", job_file(tmp_path), "--set", "name=2026-11-30", "-q")
    assert Job.objects.get(pk=int(set_name.out)).name == "2026-11-30"
    # no job field holds a date: the service names the field it does not know
    stray = run("submit", job_file(tmp_path, "submitted_at: 2020-01-01\n"))
    assert stray.code == 4 and "submitted_at" in stray.err and len(stray.err.splitlines()) == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("model: !!timestamp 2026-12-01\n", "model is a date (2026-12-01)"),
        ("model: !!timestamp 2026-12-01 10:30:00\n", "model is a date and time (2026-12-01 10:30:00)"),
        ("model: !!binary aGVsbG8=\n", "model is binary data"),
        ("gpu_types: !!set {v100: null}\n", "gpu_types is a set"),
        ("gpu_types: [v100, !!timestamp 2020-01-01]\n", "gpu_types[1] is a date (2020-01-01)"),
    ],
)
def test_a_value_json_cannot_carry_is_a_usage_error_naming_its_field(
    run: Run, tmp_path: Path, extra: str, message: str
) -> None:
    # the field replaces the job's own (a key given twice is refused before any value is read)
    field = extra.split(":", 1)[0]
    kept = "".join(line for line in JOB_YAML.splitlines(keepends=True) if not line.startswith(f"{field}:"))
    path = job_file(tmp_path, extra, text=kept)
    line = one_line_usage_error(run("submit", path))
    assert line.startswith(f"sharewise: error: job file {path}: {message}")
    assert "quote it" in line


# ------------------------------------------------------------------ option errors: one line


def test_a_malformed_option_is_one_line_with_a_pointer_to_help(run: Run) -> None:
    line = one_line_usage_error(run("submit", "--gpus", "abc"))
    assert line == (
        "sharewise: error: Invalid value for '--gpus': 'abc' is not a valid integer."
        " (see 'sharewise submit --help')"
    )
    assert one_line_usage_error(run("nosuch")).startswith("sharewise: error: No such command 'nosuch'.")


# ------------------------------------------------------------------ several jobs


def three_jobs(run: Run, tmp_path: Path) -> list[int]:
    path = job_file(tmp_path)
    return [submitted(run("submit", path, "--name", f"job-{i}")) for i in range(3)]


def test_cancel_goes_on_past_a_failure_and_exits_with_the_worst(run: Run, tmp_path: Path) -> None:
    done, pending, later = three_jobs(run, tmp_path)
    Job.objects.filter(pk=done).update(status="succeeded")
    result = run("cancel", str(done), "999999", str(pending))
    assert result.out.splitlines() == [f"Cancelled job {pending} (job-1)"]
    assert result.err.splitlines() == [
        f"sharewise: error: job {done} already succeeded",
        "sharewise: error: job 999999: not found",
    ]
    assert result.code == 3  # a job not found outranks one already finished (README)
    assert Job.objects.get(pk=pending).status == "cancelled"
    finished = run("cancel", str(done), str(later))
    assert finished.code == 4 and Job.objects.get(pk=later).status == "cancelled"
    assert finished.out.splitlines() == [f"Cancelled job {later} (job-2)"]
    as_json = run("cancel", str(done), str(pending), "-o", "json")  # cancelled stays cancelled
    assert as_json.code == 4 and [j["id"] for j in json.loads(as_json.out)] == [pending]


def test_cancel_stops_at_a_refused_token(run: Run, tmp_path: Path) -> None:
    first, second, _ = three_jobs(run, tmp_path)
    result = run("cancel", str(first), str(second), token="not-a-token")
    assert result.code == 5 and result.out == ""
    assert result.err.splitlines() == [
        f"sharewise: error: job {first}: Invalid token.",
        f"sharewise: error: not tried: job {second} (the error above applies to every request)",
    ]
    assert set(Job.objects.values_list("status", flat=True)) == {"pending"}


def test_watch_names_every_job_it_does_not_know(run: Run, tmp_path: Path) -> None:
    known = three_jobs(run, tmp_path)[0]
    result = run("watch", str(known), "999998", "999999", "--count", "1")
    assert result.code == 3
    assert result.err.splitlines() == ["sharewise: error: jobs 999998, 999999: not found"]
