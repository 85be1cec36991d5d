"""The subprocess executor: environment, progress lines, exit codes, stop on cancel."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial

import pytest

from agent.core import Agent
from agent.executors import Progress, SubprocessExecutor, parse_progress
from agent.gpus import declared_gpus
from agent.messages import JobEventReport

from .conftest import NODE, placement

# Prints what the agent gave it, two progress lines, and exits with the code in argv[1].
SCRIPT = """
import os, sys
env = {k: os.environ[k] for k in ("CUDA_VISIBLE_DEVICES", "SHAREWISE_SUB_BATCH",
       "SHAREWISE_ACCUM_STEPS", "SHAREWISE_JOB_ID", "SHAREWISE_ITERATIONS_DONE")}
print("env", sorted(env.items()), flush=True)
print("SHAREWISE_PROGRESS iterations_done=11 iter_time_s=0.25", flush=True)
print("SHAREWISE_PROGRESS iterations_done=12 iter_time_s=0.30", flush=True)
print("CUDA error: out of memory", file=sys.stderr, flush=True)
sys.exit(int(sys.argv[1]))
"""
SLEEPER = "import time\nprint('SHAREWISE_PROGRESS iterations_done=3', flush=True)\ntime.sleep(60)"


@pytest.fixture
def agent() -> Agent:
    return Agent(
        NODE,
        declared_gpus(NODE, 4, 16_000),
        partial(SubprocessExecutor, stop_grace_s=5.0),
        time.monotonic,
        progress_every_s=0.0,
    )


def step_until(
    agent: Agent, done: Callable[[list[JobEventReport]], bool], timeout_s: float = 5.0
) -> list[JobEventReport]:
    """Step with the real clock until ``done(all events so far)``; fails after ``timeout_s``."""
    events: list[JobEventReport] = []
    deadline = time.monotonic() + timeout_s
    while not done(events):
        assert time.monotonic() < deadline, f"timed out; events so far: {events}"
        events += agent.step()
        time.sleep(0.01)
    return events


def ended(events: list[JobEventReport]) -> bool:
    return any(e.event in ("finished", "failed", "stopped") for e in events)


def test_job_gets_its_gpus_and_sub_batch_and_progress_is_read(agent: Agent) -> None:
    command = [sys.executable, "-c", SCRIPT, "0"]
    agent.apply(
        placement(
            job_id=9,
            gpu_indices=[2, 3],
            sub_batch=8,
            accum_steps=4,
            batch_size=32,
            iterations_done=10,
            command=command,
        )
    )
    events = step_until(agent, ended)
    assert events[0].event == "started" and events[0].iterations_done == 10
    assert events[-1].event == "finished"
    # The last progress line wins: 12 iterations at 0.30 s.
    assert (events[-1].iterations_done, events[-1].iter_time_s) == (12, 0.30)
    assert agent.running == {}


def test_job_environment_is_set(agent: Agent, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG", logger="agent.executors")
    command = [sys.executable, "-c", SCRIPT, "0"]
    agent.apply(
        placement(
            job_id=9,
            gpu_indices=[2, 3],
            sub_batch=8,
            accum_steps=4,
            batch_size=32,
            iterations_done=10,
            command=command,
        )
    )
    step_until(agent, ended)
    expected = (
        "[('CUDA_VISIBLE_DEVICES', '2,3'), ('SHAREWISE_ACCUM_STEPS', '4'), ('SHAREWISE_ITERATIONS_DONE', "
        "'10'), ('SHAREWISE_JOB_ID', '9'), ('SHAREWISE_SUB_BATCH', '8')]"
    )
    assert f"job 9: env {expected}" in caplog.text


def test_nonzero_exit_is_failed_with_the_last_output_line(agent: Agent) -> None:
    agent.apply(placement(command=[sys.executable, "-c", SCRIPT, "3"]))
    events = step_until(agent, ended)
    assert events[-1].event == "failed"
    assert events[-1].reason == "exit code 3: CUDA error: out of memory"
    assert events[-1].iterations_done == 12


def test_cancel_stops_the_process(agent: Agent) -> None:
    agent.apply(placement(generation=1, command=[sys.executable, "-c", SLEEPER]))
    step_until(agent, lambda events: any(e.event == "progress" for e in events))
    assert agent.apply(placement(generation=2, action="stop")) is True
    events = step_until(agent, ended)
    assert (events[-1].event, events[-1].generation, events[-1].iterations_done) == ("stopped", 2, 3)
    assert not agent.busy


def test_missing_command_or_program_fails_the_job(agent: Agent) -> None:
    agent.apply(placement(job_id=1, command=None))
    agent.apply(placement(job_id=2, command=["/nonexistent/sharewise-job"]))
    failed = {e.job_id: e.reason for e in agent.step()}
    assert "no command" in failed[1]
    assert failed[2].startswith("cannot start '/nonexistent/sharewise-job'")


def test_progress_line_parsing() -> None:
    assert parse_progress("SHAREWISE_PROGRESS iterations_done=7 iter_time_s=0.5 loss=2.3") == (7.0, 0.5, None)
    assert parse_progress("SHAREWISE_PROGRESS iter_time_s=0.5 iterations_done=7") == (7.0, 0.5, None)
    assert parse_progress("SHAREWISE_PROGRESS iterations_done=7") == (7.0, None, None)
    line = "SHAREWISE_PROGRESS iterations_done=7 iter_time_s=0.5 memory_mb=10240.5"
    assert parse_progress(line) == Progress(7.0, 0.5, 10240.5)
    for bad in (
        "iterations_done=7",
        "SHAREWISE_PROGRESS iterations_done=x",
        "SHAREWISE_PROGRESS",
        "SHAREWISE_PROGRESS iterations_done=-1",
        "SHAREWISE_PROGRESS iterations_done=1 iter_time_s=0",
        "SHAREWISE_PROGRESS iterations_done=nan",
        "SHAREWISE_PROGRESS iterations_done=1 memory_mb=0",
        "SHAREWISE_PROGRESS iterations_done=1 memory_mb=inf",
    ):
        assert parse_progress(bad) is None, bad


def test_a_job_ignoring_sigterm_is_killed_after_the_grace(caplog: pytest.LogCaptureFixture) -> None:
    stubborn = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('SHAREWISE_PROGRESS iterations_done=1', flush=True)\ntime.sleep(60)"
    )
    agent = Agent(
        NODE,
        declared_gpus(NODE, 1, 16_000),
        partial(SubprocessExecutor, stop_grace_s=0.2),
        time.monotonic,
        progress_every_s=0.0,
    )
    agent.apply(placement(generation=1, command=[sys.executable, "-c", stubborn]))
    step_until(agent, lambda events: any(e.event == "progress" for e in events))
    agent.apply(placement(generation=2, action="stop"))
    events = step_until(agent, ended)
    assert events[-1].event == "stopped"
    assert "ignored SIGTERM" in caplog.text  # SIGTERM alone did nothing; SIGKILL ended it
