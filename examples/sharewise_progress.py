"""The Sharewise progress protocol for a training process, in a dozen lines (docs/AGENT.md §4).

Copy this file next to a training script (it needs nothing but the standard library) and call
:func:`report` after each iteration, or every few::

    from sharewise_progress import report
    report(iterations_done=iteration + 1, iter_time_s=elapsed, memory_mb=peak_mb)

It prints one line the node agent reads from the job's output::

    SHAREWISE_PROGRESS iterations_done=N iter_time_s=X memory_mb=M

``N``: iterations done in all, counting those before a resume; ``X``: wall seconds of one
iteration (the whole global batch, all its micro-batches), measured, so it includes the slowdown
of sharing the GPU; ``M``: peak GPU memory per GPU in MB (MiB, as nvidia-smi counts). ``X`` and
``M`` are optional; with them the scheduler learns the job's speed, its slowdown beside other
jobs, and its memory (until it knows the memory, a job of an unknown model runs alone).
"""

from __future__ import annotations

import sys
from typing import TextIO

PREFIX = "SHAREWISE_PROGRESS"


def progress_line(
    iterations_done: int, iter_time_s: float | None = None, memory_mb: float | None = None
) -> str:
    """The protocol's line for these numbers (``None``: left out). Raises ``ValueError`` for a
    negative count or a non-positive time or memory."""
    if iterations_done < 0:
        raise ValueError(f"iterations_done must be >= 0, got {iterations_done}")
    fields = [f"iterations_done={int(iterations_done)}"]
    for name, value in (("iter_time_s", iter_time_s), ("memory_mb", memory_mb)):
        if value is not None:
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
            fields.append(f"{name}={value:.6g}")
    return " ".join([PREFIX, *fields])


def report(
    iterations_done: int,
    iter_time_s: float | None = None,
    memory_mb: float | None = None,
    file: TextIO | None = None,
) -> None:
    """Print :func:`progress_line` to ``file`` (default stdout) and flush it at once: the agent
    reads lines as they come."""
    print(progress_line(iterations_done, iter_time_s, memory_mb), file=file or sys.stdout, flush=True)
