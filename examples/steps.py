"""A tiny real job for trying a cluster without a GPU or PyTorch (standard library only).

It does what a training job does for the agent's subprocess executor (docs/AGENT.md §4), with a
sleep standing for the work: ``SHAREWISE_ITERATIONS`` iterations from ``SHAREWISE_ITERATIONS_DONE``
on, each taking ``--step-s`` seconds (default 0.5), printing a line for people and the
``SHAREWISE_PROGRESS iterations_done=N iter_time_s=X`` line the agent reads. On SIGTERM (the job
cancelled or preempted) it says so, prints its progress and exits 143.

Run alone: ``SHAREWISE_ITERATIONS=5 python3 examples/steps.py --step-s 0.1``; submit it with
``sharewise submit examples/jobs/steps.yaml``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """Run the iterations; returns the exit status (0 done, 143 stopped, 2 bad input)."""
    parser = argparse.ArgumentParser(description="A tiny real job (sleeps stand for training steps).")
    parser.add_argument("--step-s", type=float, default=0.5, help="seconds per iteration")
    parser.add_argument("--name", default="steps", help="what the lines call the job")
    args = parser.parse_args(argv)
    try:
        total = int(os.environ.get("SHAREWISE_ITERATIONS", "20"))
        done = int(os.environ.get("SHAREWISE_ITERATIONS_DONE", "0"))
    except ValueError as exc:
        print(f"bad SHAREWISE_ITERATIONS or SHAREWISE_ITERATIONS_DONE: {exc}", file=sys.stderr)
        return 2
    stop = False

    def on_sigterm(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_sigterm)
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "none")
    print(f"{args.name}: iterations {done + 1} to {total} on GPUs {gpus}", flush=True)
    for iteration in range(done, total):
        began = time.perf_counter()
        time.sleep(args.step_s)
        elapsed = time.perf_counter() - began
        print(f"{args.name}: iteration {iteration + 1}/{total} done", flush=True)
        print(f"SHAREWISE_PROGRESS iterations_done={iteration + 1} iter_time_s={elapsed:.3f}", flush=True)
        if stop:
            print(f"{args.name}: stopped by SIGTERM after iteration {iteration + 1}", flush=True)
            return 128 + signal.SIGTERM
    print(f"{args.name}: finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
