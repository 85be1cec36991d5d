"""The Kueue-shaped workload: 15,000 short jobs over 30 tenants in 5 groups of 6, after the
baseline configuration of Kueue's scheduler performance test (kubernetes-sigs/kueue,
``test/performance/scheduler/configs/baseline/generator.yaml``; its expected results, 351 s
end to end on average over five runs, in ``rangespec.yaml`` beside it).

The shape there: 5 cohorts × 6 ClusterQueues; each queue has a nominal quota of 20 (CPU units)
and may borrow up to 100 more within its cohort; each queue receives three streams at once,
one workload after every interval:

============  ===========  ==========  ========  ========  ===============
class         per queue    interval    runtime   request   Kueue priority
============  ===========  ==========  ========  ========  ===============
small         350          0.1 s       0.2 s     1         50
medium        100          0.5 s       0.5 s     5         100
large         50           1.2 s       1.0 s     20        200
============  ===========  ==========  ========  ========  ===============

so 500 workloads a queue, 15,000 in all, arriving within the first 60 s (small over 35 s,
medium over 50 s, large over 60 s): 1,320 unit-seconds of work a queue, 39,600 in all, on 600
units, i.e. at least 66 s of pure run time.

Mapping onto Sharewise **(ours)**: a ClusterQueue is a tenant (``cohort-C-cq-Q``) with
guaranteed 20 GPUs and a borrowing limit of 100; a unit of quota is one GPU; the cluster has
the 600 GPUs of the 30 nominal quotas (:data:`NODES` × :data:`GPUS_PER_NODE`, so a large
workload is one whole node). Sharewise has no cohort: a tenant borrows idle GPUs of the whole
cluster, so the 5 groups are only the tenants' names; since the 5 cohorts are alike and equally
loaded, that changes little. Kueue's priorities 50/100/200 become 25/50/100 (the API takes
−100…100; only the order matters). Jobs never share a GPU (Kueue admits whole requests).

Units: seconds (s), GPUs, iterations.

Imported by ``bench_kueue.py``; run alone (``python benchmarks/kueue_shape.py [--jobs N] [--out
FILE]``) it prints the workload's summary and, with ``--out``, writes it as a trace (:func:`main`).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script from benchmarks/: the project's packages
    sys.path.insert(0, str(REPO))

from scheduling.core import types as core  # noqa: E402

#: Workloads in Kueue's baseline scenario (5 cohorts × 6 queues × 500).
KUEUE_JOBS = 15_000
#: Kueue's published end-to-end time of that scenario (s): "Average value 351116.4 (+/- 0.9%)"
#: ms over 5 trial runs (rangespec.yaml, ``cmd.maxWallMs``' comment).
KUEUE_WALL_S = 351.1
#: Kueue's published average time to admission per class (s), same file and runs.
KUEUE_ADMISSION_S = {"small": 215.5, "medium": 76.8, "large": 6.7}
COHORTS = 5
QUEUES_PER_COHORT = 6
#: Nominal quota and borrowing limit of each queue (Kueue's units, here GPUs).
NOMINAL_GPUS = 20
BORROW_LIMIT_GPUS = 100
NODES = 30
GPUS_PER_NODE = 20
#: Iterations of every job; its iteration time is ``runtime_s / ITERATIONS`` **(ours)**.
ITERATIONS = 10
MODEL = "resnet50"
BATCH_SIZE = 64


@dataclass(frozen=True, slots=True)
class JobClass:
    """One workload stream of a queue: ``per_tenant`` jobs, one every ``interval_s`` (the first
    after one interval, as Kueue's generator waits before each creation), each running
    ``runtime_s`` on ``gpus`` GPUs at ``priority``."""

    name: str
    per_tenant: int
    interval_s: float
    runtime_s: float
    gpus: int
    priority: int


CLASSES = (
    JobClass("small", 350, 0.1, 0.2, 1, 25),
    JobClass("medium", 100, 0.5, 0.5, 5, 50),
    JobClass("large", 50, 1.2, 1.0, 20, 100),
)


def tenant_names() -> tuple[str, ...]:
    """The 30 tenants, ``cohort-0-cq-0`` … ``cohort-4-cq-5`` (group first)."""
    return tuple(f"cohort-{c}-cq-{q}" for c in range(COHORTS) for q in range(QUEUES_PER_COHORT))


def class_of(gpus: int) -> str:
    """The class name of a job of ``gpus`` GPUs (each class has its own gang size). Raises
    ``KeyError`` for another size."""
    return {c.gpus: c.name for c in CLASSES}[gpus]


def scaled_counts(jobs: int) -> dict[str, int]:
    """Jobs of each class per tenant for about ``jobs`` in all: Kueue's counts × ``jobs`` /
    15,000, rounded, at least 1 (intervals unchanged, so a smaller run arrives sooner). Raises
    ``ValueError`` for ``jobs`` < 1."""
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    return {c.name: max(1, round(c.per_tenant * jobs / KUEUE_JOBS)) for c in CLASSES}


#: The fewest jobs a scaled scenario has: one of each class for each of the 30 tenants (90).
MIN_JOBS = COHORTS * QUEUES_PER_COHORT * len(CLASSES)


def total_jobs(jobs: int) -> int:
    """How many jobs :func:`kueue_workload` ``(jobs)`` has: 30 tenants × the sum of
    :func:`scaled_counts` (e.g. 15,000 → 15,000; 90 → 30 × (2 + 1 + 1) = 120; 1 → 90). Raises
    ``ValueError`` for ``jobs`` < 1."""
    return COHORTS * QUEUES_PER_COHORT * sum(scaled_counts(jobs).values())


#: ``--jobs``' help, the same in ``kueue_shape.py`` and ``bench_kueue.py``.
JOBS_HELP = (
    f"about this many jobs (default {KUEUE_JOBS:,}: Kueue's): each class's count a tenant is "
    f"max(1, round(Kueue's count x N / {KUEUE_JOBS:,})), so every tenant gets at least one of each "
    f"class and a run has at least {MIN_JOBS} jobs (--jobs 90 gives 120); the summary states the count"
)


def kueue_workload(jobs: int = KUEUE_JOBS) -> tuple[core.Job, ...]:
    """The scenario's jobs (:func:`scaled_counts` per class and tenant), sorted by submit time
    (then tenant, class), ids 0… in that order. Each tenant's ``k``-th job of a class (``k`` = 1…)
    is submitted at ``k × interval_s``; it runs ``ITERATIONS`` iterations of ``runtime_s /
    ITERATIONS`` s, exclusively."""
    counts = scaled_counts(jobs)
    rows = []
    for t, tenant in enumerate(tenant_names()):
        for c, cls in enumerate(CLASSES):
            for k in range(1, counts[cls.name] + 1):
                rows.append((round(k * cls.interval_s, 6), t, c, tenant, cls))
    rows.sort(key=lambda r: r[:3])
    return tuple(
        core.Job(
            i,
            tenant,
            MODEL,
            BATCH_SIZE,
            cls.gpus,
            ITERATIONS,
            submit,
            cls.runtime_s / ITERATIONS,
            priority=cls.priority,
            sharing_allowed=False,
        )
        for i, (submit, _, _, tenant, cls) in enumerate(rows)
    )


def write_trace(path: Path, jobs: Sequence[core.Job]) -> None:
    """Write ``jobs`` as a Chronus-format CSV (tenant in ``user``, seconds; the format the
    simulator and ``manage.py demo --trace`` read with tenants). That format has no priority
    or sharing column: the demo replays them at priority 0, sharing allowed."""
    with path.open("w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["job_id", "user", "num_gpu", "submit_time", "iterations", "model_name", "duration"])
        for j in jobs:
            out.writerow(
                [j.id, j.tenant, j.gpus, j.submit_time, j.iterations, j.model, j.iterations * j.iter_time_s]
            )


def summary(jobs: Sequence[core.Job]) -> list[str]:
    """Lines describing ``jobs`` (a :func:`kueue_workload`): jobs and tenants; per class its
    jobs a tenant and in all, GPUs, runtime (s), interval (s) and priority; the arrivals' span
    (s); the work (GPU-seconds) and the least time it takes on the cluster's GPUs (s)."""
    tenants = {j.tenant for j in jobs}
    lines = [f"{len(jobs):,} jobs of {len(tenants)} tenants ({COHORTS} groups of {QUEUES_PER_COHORT})"]
    for cls in CLASSES:
        count = sum(1 for j in jobs if j.gpus == cls.gpus)
        lines.append(
            f"{cls.name}: {count // len(tenants):,} a tenant, {count:,} in all, {cls.gpus} GPU(s), "
            f"{cls.runtime_s:g} s each, one every {cls.interval_s:g} s, priority {cls.priority}"
        )
    work = sum(j.gpus * j.iterations * j.iter_time_s for j in jobs)
    gpus = NODES * GPUS_PER_NODE
    first, last = min(j.submit_time for j in jobs), max(j.submit_time for j in jobs)
    lines.append(f"arrivals from {first:g} s to {last:g} s")
    lines.append(
        f"work: {work:,.0f} GPU-seconds on {gpus} GPUs ({NODES} nodes x {GPUS_PER_NODE}): at least "
        f"{work / gpus:.1f} s of pure run time"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``python benchmarks/kueue_shape.py [--jobs N] [--out FILE]``: print :func:`summary` of the
    workload of about ``N`` jobs (:data:`JOBS_HELP`; default 15,000: Kueue's) and, with ``--out``,
    write it as a Chronus-format CSV (:func:`write_trace`). Returns the exit status: 0; 2 for a
    bad argument or an ``--out`` that cannot be written (one line on stderr, nothing printed);
    1, quietly, when stdout is closed early (``| head``)."""
    from cli_args import positive_int  # benchmarks/cli_args.py (here: importing this module needs none)

    parser = argparse.ArgumentParser(
        description="The Kueue-shaped workload of bench_kueue.py: print its summary, optionally write it "
        "as a trace (docs/PERFORMANCE.md)."
    )
    parser.add_argument("--jobs", type=positive_int, default=KUEUE_JOBS, help=JOBS_HELP)
    parser.add_argument(
        "--out", type=Path, help="also write them to this CSV (the simulator's and manage.py demo --trace's)"
    )
    args = parser.parse_args(argv)
    jobs = kueue_workload(args.jobs)
    if args.out is not None:  # written first: a path that cannot be written fails before any output
        error = write_trace_or_error(args.out, jobs)
        if error is not None:
            print(error, file=sys.stderr)
            return 2
    lines = summary(jobs)
    if args.out is not None:
        lines.append(f"wrote {len(jobs):,} jobs to {args.out}")
    return print_lines(lines)


def write_trace_or_error(path: Path, jobs: Sequence[core.Job]) -> str | None:
    """:func:`write_trace`; ``None`` when written, else the one-line error (a missing folder, a
    folder given as the file, no permission: the ``OSError``'s reason) for the caller to print
    before exiting 2."""
    try:
        write_trace(path, jobs)
    except OSError as exc:
        return f"error: cannot write {path}: {exc.strerror or exc}"
    return None


def print_lines(lines: Sequence[str]) -> int:
    """Print ``lines`` to stdout; 0, or 1 when the reader closed the pipe early (``| head``):
    then stdout is pointed at ``/dev/null`` so the interpreter's final flush does not fail again
    (the pattern of the Python documentation, "Note on SIGPIPE", in the ``signal`` module)."""
    try:
        print("\n".join(lines))
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
