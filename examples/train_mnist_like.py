"""A small real training job for the node agent's subprocess executor (PyTorch; a CPU is enough).

It trains a two-layer perceptron on synthetic MNIST-shaped data (28×28 inputs, 10 classes, drawn
from a fixed seed, so no download is needed) and honours the variables the agent sets:

- ``SHAREWISE_SUB_BATCH`` (b) and ``SHAREWISE_ACCUM_STEPS`` (k): each iteration processes the
  global batch B = b·k as k micro-batches of b samples whose gradients are accumulated before one
  optimizer step (gradient accumulation, MODEL.md §1): the update is that of the full batch B,
  only memory and speed change.
- ``SHAREWISE_ITERATIONS`` (total) and ``SHAREWISE_ITERATIONS_DONE`` (where to resume).
- ``SHAREWISE_JOB_ID`` (seed of the data) and ``CUDA_VISIBLE_DEVICES`` (uses ``cuda`` when
  torch sees a GPU, else the CPU).

After each iteration it reports its progress with the protocol of docs/AGENT.md §4
(``sharewise_progress.report``, beside this file): ``SHAREWISE_PROGRESS iterations_done=N
iter_time_s=X memory_mb=M`` (X: wall seconds of that iteration; M: the peak GPU memory PyTorch
reserved, MiB, on a GPU only). On SIGTERM (the agent stopping the job) it finishes the current
iteration, prints its progress and exits 143.

Run alone: ``SHAREWISE_SUB_BATCH=16 SHAREWISE_ACCUM_STEPS=4 SHAREWISE_ITERATIONS=20 python
examples/train_mnist_like.py``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import torch
from sharewise_progress import report
from torch import nn

INPUTS, HIDDEN, CLASSES = 28 * 28, 64, 10


def env_int(name: str, default: int, low: int) -> int:
    """Integer variable ``name`` (≥ ``low``); exits with status 2 and a message when it is not one."""
    text = os.environ.get(name, str(default))
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        print(f"{name} must be an integer >= {low}, got {text!r}", file=sys.stderr)
        raise SystemExit(2)
    return value


def make_model(seed: int) -> nn.Module:
    """The model (784 → 64 → 10 MLP) with weights drawn from ``seed``."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(INPUTS, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


def global_batch(iteration: int, batch_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Iteration ``iteration``'s global batch: ``batch_size`` images (1×28×28) and labels (0-9).

    Drawn from ``(seed, iteration)`` only, so the batch is the same whatever the sub-batch.
    """
    generator = torch.Generator().manual_seed(seed * 1_000_003 + iteration)
    images = torch.rand(batch_size, 1, 28, 28, generator=generator)
    labels = torch.randint(0, CLASSES, (batch_size,), generator=generator)
    return images, labels


def train_iteration(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    images: torch.Tensor,
    labels: torch.Tensor,
    sub_batch: int,
) -> float:
    """One optimizer step over the global batch, in micro-batches of ``sub_batch`` samples.

    Each micro-batch's mean loss is scaled by its share of the batch (b/B), so the accumulated
    gradient equals the gradient of the mean loss over the whole batch. Returns that loss.
    """
    device = next(model.parameters()).device
    loss_fn = nn.CrossEntropyLoss()
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    batch_size = len(labels)
    for start in range(0, batch_size, sub_batch):
        x = images[start : start + sub_batch].to(device)
        y = labels[start : start + sub_batch].to(device)
        loss = loss_fn(model(x), y) * (len(y) / batch_size)
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total


def main() -> int:
    """Train as the environment says; returns the exit status."""
    sub_batch = env_int("SHAREWISE_SUB_BATCH", 32, 1)
    accum_steps = env_int("SHAREWISE_ACCUM_STEPS", 1, 1)
    iterations = env_int("SHAREWISE_ITERATIONS", 50, 1)
    done = env_int("SHAREWISE_ITERATIONS_DONE", 0, 0)
    seed = env_int("SHAREWISE_JOB_ID", 0, 0)
    stop = False

    def on_sigterm(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_sigterm)
    torch.set_num_threads(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = make_model(seed).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # A resumed job has no checkpoint here: it continues counting from ``done`` (a real job
    # would reload its weights).
    for iteration in range(done, iterations):
        began = time.perf_counter()
        images, labels = global_batch(iteration, sub_batch * accum_steps, seed)
        loss = train_iteration(model, optimizer, images, labels, sub_batch)
        elapsed = time.perf_counter() - began
        memory = torch.cuda.max_memory_reserved(device) / 2**20 if device.type == "cuda" else None
        report(iteration + 1, elapsed, memory)
        print(f"iteration {iteration + 1}: loss {loss:.4f}", flush=True)
        if stop:
            return 128 + signal.SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
