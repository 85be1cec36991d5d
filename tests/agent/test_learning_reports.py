"""What the agent reports for learning (docs/AGENT.md §2, §4): memory from the progress lines, the
out-of-memory classification of a failure, the partners of a placement, and an emulated job's
true speed when it differs from the message's."""

from __future__ import annotations

import sys
import time
from functools import partial

import pytest

from agent.core import Agent
from agent.executors import EmulatedExecutor, SubprocessExecutor, failure_kind
from agent.gpus import declared_gpus
from agent.messages import MessageError, PlacementMessage, placement_kwargs

from .conftest import NODE, placement
from .test_subprocess import ended, step_until

# A job that reports its memory, then dies the way PyTorch does when the GPU is full.
OOM_JOB = """
import sys
print("SHAREWISE_PROGRESS iterations_done=4 iter_time_s=0.2 memory_mb=15321.5", flush=True)
print("Traceback (most recent call last):", file=sys.stderr, flush=True)
print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", file=sys.stderr, flush=True)
sys.exit(1)
"""


def subprocess_agent() -> Agent:
    return Agent(
        NODE, declared_gpus(NODE, 4, 16_000), SubprocessExecutor, time.monotonic, progress_every_s=0.0
    )


def test_an_out_of_memory_failure_is_classified_and_memory_reported() -> None:
    agent = subprocess_agent()
    agent.apply(placement(command=[sys.executable, "-c", OOM_JOB]))
    events = step_until(agent, ended)
    failed = events[-1]
    assert (failed.event, failed.failure_kind, failed.memory_mb) == ("failed", "oom", 15321.5)
    assert (
        failed.reason == "exit code 1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    )
    assert failed.payload()["failure_kind"] == "oom" and failed.payload()["memory_mb"] == 15321.5


def test_another_failure_is_not_out_of_memory() -> None:
    agent = subprocess_agent()
    agent.apply(
        placement(command=[sys.executable, "-c", "import sys; print('ValueError: bad lr'); sys.exit(3)"])
    )
    failed = step_until(agent, ended)[-1]
    assert (failed.event, failed.failure_kind, failed.reason) == (
        "failed",
        "",
        "exit code 3: ValueError: bad lr",
    )


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB", "oom"),
        ("torch.cuda.OutOfMemoryError: CUDA out of memory.", "oom"),
        ("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "oom"),
        ("CUDA error: out of memory", "oom"),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", ""),
        ("MemoryError", ""),  # the host's memory, not the GPU's
    ],
)
def test_out_of_memory_markers(line: str, kind: str) -> None:
    assert failure_kind(["Traceback (most recent call last):", line]) == kind


def test_placements_carry_their_partners() -> None:
    kwargs = placement_kwargs(
        NODE,
        7,
        [0],
        generation=2,
        action="update",
        sub_batch=16,
        accum_steps=2,
        batch_size=32,
        iterations=100,
        iterations_done=0,
        iter_time_s=0.5,
        slowdown=1.3,
        command="",
        model="resnet18",
        partners=[("vgg19", 16)],
    )
    assert kwargs["partners"] == [{"model": "vgg19", "sub_batch": 16}]
    assert PlacementMessage.from_kwargs(kwargs).partners == (("vgg19", 16),)
    assert PlacementMessage.from_kwargs(placement()).partners == ()  # an older server sends none
    for bad in ({"model": "vgg19"}, {"model": 3, "sub_batch": 16}, {"model": "x", "sub_batch": 0}, "vgg19"):
        with pytest.raises(MessageError, match="partners must be objects with a model and a sub_batch >= 1"):
            PlacementMessage.from_kwargs(placement(partners=[bad]))


class Truth:
    """True speeds: 0.4 s per iteration; ξ 1.5 beside any partner."""

    def iter_time_s(self, message: PlacementMessage) -> float:
        return 0.4

    def slowdown(self, message: PlacementMessage) -> float:
        return 1.5 if message.partners else 1.0


def test_an_emulated_job_runs_at_its_true_speed() -> None:
    factory = partial(EmulatedExecutor, speedup=10.0, truth=Truth())
    agent = Agent(NODE, declared_gpus(NODE, 4, 16_000), factory, progress_every_s=0.0)
    # the server believes 0.5 s and ξ 1.2 beside a partner; the truth is 0.4 s and ξ 1.5
    agent.apply(
        placement(iterations=1000, slowdown=1.2, partners=[{"model": "vgg19", "sub_batch": 16}]), now=0.0
    )
    agent.step(now=0.0)
    # one iteration takes 0.4 · 1.5 / 10 = 0.06 s of wall time: 50.5 iterations after 3.03 s
    progress = agent.step(now=3.03)[-1]
    assert progress.iterations_done == 50 and progress.iter_time_s == pytest.approx(0.6)  # 0.4 · 1.5
    # the partner leaves: alone, 0.04 s per iteration: 50.25 more after 2.01 s (100.75 in all)
    agent.apply(placement(generation=2, iterations=1000, action="update", slowdown=1.0), now=3.03)
    later = agent.step(now=5.04)[-1]
    assert later.iterations_done == 100 and later.iter_time_s == pytest.approx(0.4)
