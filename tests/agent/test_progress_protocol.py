"""The progress protocol of docs/AGENT.md §4 as examples/sharewise_progress.py writes it and the
agent reads it: a job that reports with it has its iteration time and memory reported."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from agent.core import Agent
from agent.executors import Progress, SubprocessExecutor, parse_progress
from agent.gpus import declared_gpus

from .conftest import NODE, placement
from .test_subprocess import ended, step_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def helper() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sharewise_progress", EXAMPLES / "sharewise_progress.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_helpers_lines_are_what_the_agent_reads() -> None:
    progress = helper()
    assert (
        progress.progress_line(12, 0.25, 10240.5)
        == "SHAREWISE_PROGRESS iterations_done=12 iter_time_s=0.25 memory_mb=10240.5"
    )
    assert parse_progress(progress.progress_line(12, 0.25, 10240.5)) == Progress(12.0, 0.25, 10240.5)
    assert parse_progress(progress.progress_line(3)) == Progress(3.0, None, None)
    for bad in ((-1,), (1, 0.0), (1, 0.5, -3.0)):
        with pytest.raises(ValueError, match="must be"):
            progress.progress_line(*bad)


def test_a_job_reporting_with_the_helper_has_its_time_and_memory_reported() -> None:
    job = (
        f"import sys; sys.path.insert(0, {str(EXAMPLES)!r})\n"
        "from sharewise_progress import report\n"
        "for i in range(3):\n"
        "    report(i + 1, 0.125, 2048.0 + i)\n"
    )
    agent = Agent(
        NODE, declared_gpus(NODE, 1, 16_000), SubprocessExecutor, time.monotonic, progress_every_s=0.0
    )
    agent.apply(placement(iterations=3, command=[sys.executable, "-c", job]))
    finished = step_until(agent, ended)[-1]
    assert (finished.event, finished.iterations_done) == ("finished", 3)
    assert (finished.iter_time_s, finished.memory_mb) == (0.125, 2050.0)
