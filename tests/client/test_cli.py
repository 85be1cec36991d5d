"""The ``sharewise`` command against a live service: submit (file, flags, idempotency), list and
queue with the pending reason, show, cancel, logs, watch, login, and the exit codes of failures."""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from cluster.models import Job
from scheduling import service as scheduler
from tests.client.conftest import Result, Service

Run = Callable[..., Result]

JOB_YAML = """\
# a job file, like an sbatch script's directives
name: steps
model: resnet50
batch_size: 128
iterations: 100
gpus: 8
gpu_memory_mb: 1000
iteration_time_s: 2.0
command: [python3, examples/steps.py, --name, "two words"]
"""


@pytest.fixture
def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB_YAML)
    return path


@pytest.fixture
def rounds() -> Iterator[Callable[[], None]]:
    """Run a round in this process (placements go nowhere: no agent in these tests)."""
    scheduler.set_dispatcher(lambda messages: None)
    yield lambda: (scheduler.run_round(policy="sjf"), None)[1]
    scheduler.set_dispatcher(None)


def submitted(result: Result) -> int:
    assert result.code == 0, result.err
    return int(result.out.split()[2])  # "Submitted job 12 (name), pending"


def test_submit_a_job_file_and_see_it(run: Run, job_file: Path) -> None:
    job_id = submitted(run("submit", str(job_file)))
    job = Job.objects.get(pk=job_id)
    assert (job.name, job.gpus, job.iterations, job.iteration_time_s) == ("steps", 8, 100, 2.0)
    assert job.command == "python3 examples/steps.py --name 'two words'"  # the list, shell-quoted
    shown = run("show", str(job_id))
    assert shown.code == 0
    assert "steps" in shown.out and "pending" in shown.out and "not yet considered" in shown.out
    assert "submitted" in shown.out  # its first event
    as_json = json.loads(run("show", str(job_id), "-o", "json").out)
    assert as_json["id"] == job_id and [e["kind"] for e in as_json["events"]] == ["submitted"]


def test_flags_and_set_override_the_file(run: Run, job_file: Path) -> None:
    result = run("submit", str(job_file), "--name", "other", "--gpus", "2", "--set", "priority=5", "-q")
    job = Job.objects.get(pk=int(result.out))
    assert (job.name, job.gpus, job.priority) == ("other", 2, 5)
    flags = "--name bare --model bert --batch-size 32 --iterations 10 --gpus 1 -o json"
    flags_only = run("submit", *flags.split())
    assert json.loads(flags_only.out)["name"] == "bare"
    from_stdin = run("submit", "-", "-q", stdin=JOB_YAML.replace("name: steps", "name: piped"))
    assert Job.objects.get(pk=int(from_stdin.out)).name == "piped"


def test_every_submit_carries_an_idempotency_key(run: Run, job_file: Path) -> None:
    once = run("submit", str(job_file), "--idempotency-key", "run-7", "-q")
    again = run("submit", str(job_file), "--idempotency-key", "run-7", "-q")
    assert once.out == again.out  # the same job, not a second one
    other = run("submit", str(job_file), "-q")  # a fresh key each time otherwise
    assert other.out != once.out
    assert Job.objects.count() == 2


def test_list_and_queue_show_why_jobs_wait(
    run: Run, service: Service, job_file: Path, rounds: Callable[[], None]
) -> None:
    first = submitted(run("submit", str(job_file)))
    rounds()  # the first job takes all 8 GPUs
    second = submitted(run("submit", str(job_file), "--name", "second"))
    rounds()
    reason = scheduler.waiting_details([second])[second].reason
    listed = run("list")
    assert listed.code == 0
    lines = listed.out.splitlines()
    assert lines[0].split()[:3] == ["ID", "NAME", "STATUS"]
    row = next(line for line in lines if line.split()[0] == str(second))
    assert "pending" in row and reason in row and "in " in row  # the reason and the estimated start
    assert "node-00:0,1,2,3" in next(line for line in lines if line.split()[0] == str(first))
    queue = run("queue", "-o", "json")
    jobs = json.loads(queue.out)
    assert [(j["id"], j["status"]) for j in jobs] == [(first, "running"), (second, "pending")]
    assert jobs[1]["pending_reason"] == reason and jobs[1]["estimated_start_at"]
    assert json.loads(run("list", "--status", "running", "-o", "json").out)[0]["id"] == first
    assert run("list", token=service.charlie).out.strip() == "No jobs."


def test_list_cuts_a_long_reason_to_its_column_and_show_keeps_it_whole(run: Run, job_file: Path) -> None:
    # an 8,000-character failure reason filled some 50 lines of the REASON column
    job_id = submitted(run("submit", str(job_file)))
    reason = "Traceback line\n" + "x" * 8000 + " the end"
    Job.objects.filter(pk=job_id).update(status=Job.Status.FAILED, failure_reason=reason)
    lines = run("list").out.splitlines()
    assert len(lines) == 2 and all(len(line) <= 160 for line in lines)  # the header, one row
    assert lines[1].split()[:3] == [str(job_id), "steps", "failed"]
    assert "Traceback line xxx" in lines[1] and lines[1].endswith("x…")
    assert json.loads(run("show", str(job_id), "-o", "json").out)["failure_reason"] == reason
    assert "the end" in run("show", str(job_id)).out


def test_cancel_stops_a_job_and_a_finished_one_is_refused(run: Run, job_file: Path) -> None:
    job_id = submitted(run("submit", str(job_file)))
    result = run("cancel", str(job_id))
    assert result.code == 0 and result.out.strip() == f"Cancelled job {job_id} (steps)"
    assert Job.objects.get(pk=job_id).status == "cancelled"
    assert run("cancel", str(job_id)).code == 0  # harmless again
    Job.objects.filter(pk=job_id).update(status="succeeded")
    refused = run("cancel", str(job_id))
    assert refused.code == 4 and refused.err.strip() == f"sharewise: error: job {job_id} already succeeded"


def test_logs_print_the_output_and_follow_ends_with_the_job(
    run: Run, service: Service, job_file: Path, rounds: Callable[[], None]
) -> None:
    job_id = submitted(run("submit", str(job_file)))
    rounds()
    node = APIClient()
    node.credentials(HTTP_AUTHORIZATION=f"Node {service.node_tokens['node-00']}")
    url = f"/api/v1/agent/jobs/{job_id}/logs/"
    for offset, text in ((0, "step 1\n"), (7, "step 2\n")):
        assert (
            node.post(url, {"run": "node-00/g1", "offset": offset, "data": text}, format="json").status_code
            == 200
        )
    assert run("logs", str(job_id)).out == "step 1\nstep 2\n"
    assert run("logs", str(job_id), "--tail", "1").out == "step 2\n"
    Job.objects.get(pk=job_id).cancel()
    node.post(url, {"run": "node-00/g1", "offset": 14, "data": "stopped\n", "eof": True}, format="json")
    followed = run("logs", str(job_id), "--follow")
    assert followed.code == 0 and followed.out == "step 1\nstep 2\nstopped\n"


def test_watch_refreshes_until_the_jobs_end(run: Run, job_file: Path) -> None:
    job_id = submitted(run("submit", str(job_file)))
    watched = run("watch", str(job_id), "--interval", "0.2", "--count", "2")
    assert watched.code == 0 and watched.out.count("STATUS") == 2  # two refreshes of a pending job
    Job.objects.get(pk=job_id).cancel()
    ended = run("watch", str(job_id))
    assert ended.code == 7 and ended.err.strip() == f"sharewise: error: job {job_id} cancelled"
    assert run("watch", "--count", "1").code == 0


def test_login_saves_a_private_config_that_later_commands_use(
    run: Run, service: Service, tmp_path: Path
) -> None:
    result = run("login", "--api", service.url, "--token-stdin", stdin=service.alice + "\n", env=False)
    assert result.code == 0 and "tenant team-a" in result.out
    path = tmp_path / "config.json"
    assert json.loads(path.read_text()) == {"api": service.url, "token": service.alice}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    whoami = run("whoami", env=False)
    assert whoami.code == 0 and whoami.out.startswith(f"tenant team-a at {service.url}")
    bad = run("login", "--api", service.url, "--token-stdin", stdin="wrong\n", env=False)
    assert bad.code == 5 and bad.err.strip() == "sharewise: error: Invalid token."
    assert json.loads(path.read_text())["token"] == service.alice  # a failed login changes nothing


NO_FILE = "sharewise: error: cannot read job file missing.yaml: No such file or directory"
NOTHING = "sharewise: error: nothing to submit: give a job FILE or the fields as flags (see --help)"
TOO_WIDE = "sharewise: error: invalid input: gpus: at most 8 GPUs (the healthy GPUs of the cluster), got 99"
#: every field the API's ``fields`` names (its ``error`` names only ``model``)
MISSING = "sharewise: error: invalid input: model, batch_size, iterations, gpus: This field is required."
MIXED = (
    "sharewise: error: invalid input: model: This field is required.; "
    "gpus: at most 8 GPUs (the healthy GPUs of the cluster), got 99"
)


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        ("show 999999", 3, "sharewise: error: job 999999: not found"),
        ("submit --name x --model m --batch-size 8 --iterations 1 --gpus 99", 4, TOO_WIDE),
        ("submit --name x", 4, MISSING),
        ("submit --name x --batch-size 8 --iterations 1 --gpus 99", 4, MIXED),
        ("submit", 2, NOTHING),
        ("submit missing.yaml", 2, NO_FILE),
        ("submit --set novalue", 2, "sharewise: error: --set takes KEY=VALUE, got 'novalue'"),
    ],
)
def test_failures_are_one_line_with_an_exit_code(run: Run, argv: str, code: int, message: str) -> None:
    result = run(*argv.split())
    assert (result.code, result.err.strip()) == (code, message)
    assert "Traceback" not in result.err


def test_bad_job_files_and_tokens(run: Run, tmp_path: Path, service: Service) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    result = run("submit", str(broken))
    assert result.code == 2 and result.err.startswith(f"sharewise: error: job file {broken}: invalid YAML")
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just words\n")
    assert "must hold a mapping of job fields" in run("submit", str(scalar)).err
    denied = run("list", token="not-a-token")
    assert (denied.code, denied.err.strip()) == (5, "sharewise: error: Invalid token.")
    missing = run("list", env=False)
    assert missing.code == 2 and "run 'sharewise login'" in missing.err


def test_an_unreachable_service_is_exit_code_1(run: Run) -> None:
    result = run("--api", "http://127.0.0.1:9", "list")
    assert (result.code, result.err.strip()) == (
        1,
        "sharewise: error: cannot reach http://127.0.0.1:9: connection refused",
    )
