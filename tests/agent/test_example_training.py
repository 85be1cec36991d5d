"""The example training script (PyTorch, CPU) run through the subprocess executor.

Skipped with a reason where torch is not installed (it is not in requirements.txt: the agent
does not need it, only this example job does). torch takes seconds to import, so the job is
started first (module fixture) and the in-process test imports torch while the job runs.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from types import ModuleType

import pytest

from agent.core import Agent
from agent.executors import SubprocessExecutor
from agent.gpus import declared_gpus
from agent.messages import JobEventReport

from .conftest import NODE, placement
from .test_subprocess import ended, step_until

pytestmark = [
    pytest.mark.slow,  # a few seconds: torch's import, in the job and in-process
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="torch is not installed (pip install torch to run the example job)",
    ),
    pytest.mark.usefixtures("example_job"),
    pytest.mark.filterwarnings("ignore:Failed to initialize NumPy"),  # torch without numpy: harmless here
]

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "train_mnist_like.py"


@pytest.fixture(scope="module")
def example_job() -> Iterator[tuple[Agent, list[JobEventReport]]]:
    """The example job under an agent: 6 iterations of a global batch 16 = 4 micro-batches of 4,
    resuming after iteration 2. Yields the agent and the events stepped so far."""
    agent = Agent(
        NODE,
        declared_gpus(NODE, 1, 16_000),
        partial(SubprocessExecutor, stop_grace_s=10.0),
        time.monotonic,
        progress_every_s=0.0,
    )
    agent.apply(
        placement(
            job_id=3,
            iterations=6,
            iterations_done=2,
            sub_batch=4,
            accum_steps=4,
            batch_size=16,
            command=[sys.executable, str(SCRIPT)],
        )
    )
    events = agent.step()
    yield agent, events
    agent.shutdown()
    step_until(agent, lambda _: not agent.busy, timeout_s=30.0)


def load_example() -> ModuleType:
    if str(SCRIPT.parent) not in sys.path:  # as when run as a script: its helper sits beside it
        sys.path.append(str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("train_mnist_like", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gradient_accumulation_gives_the_full_batch_update() -> None:
    # Gradient of a mean over B samples = Σ over k micro-batches of (b/B) · their mean gradient,
    # so one step with b = 8, k = 4 must land on the same weights as one step with b = B = 32.
    import torch

    example = load_example()
    images, labels = example.global_batch(0, 32, seed=5)
    initial = torch.cat([p.detach().flatten() for p in example.make_model(seed=5).parameters()])
    weights = []
    for sub_batch in (32, 8):
        model = example.make_model(seed=5)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        example.train_iteration(model, optimizer, images, labels, sub_batch)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.allclose(weights[0], weights[1], atol=1e-6)
    assert not torch.allclose(weights[0], initial)  # the step did move the weights


def test_example_job_runs_to_completion_under_the_agent(
    example_job: tuple[Agent, list[JobEventReport]],
) -> None:
    agent, events = example_job
    events += step_until(agent, ended, timeout_s=60.0)
    assert [e.event for e in events if e.event != "progress"] == ["started", "finished"]
    progress = [e.iterations_done for e in events if e.event == "progress"]
    assert progress == sorted(progress) and set(progress) <= {3, 4, 5, 6}
    assert events[-1].iterations_done == 6
    assert events[-1].iter_time_s is not None and events[-1].iter_time_s > 0
