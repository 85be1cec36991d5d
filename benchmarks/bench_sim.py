"""Simulate the whole Chronus Philly trace under every policy, on one core, and time it.

Scenario: ``chronus-philly-mix1.csv`` (30,940 rows; the 184 asking for 0 GPUs are rejected by the
loader) on a cluster of ``--cluster`` (default 128 × 8 = 1,024 V100s of 49,140 MB: the trace's
mean GPU demand, Σ gpus × duration ÷ arrival span, is about 1,106 GPUs, so this cluster is loaded
and queues build up without growing for ever), rounds every 60 s, the shipped default profile.

The process is pinned to one CPU (``os.sched_setaffinity``) as the issue asks. For each policy:
median wall time (``time.perf_counter``) and median CPU time (``time.process_time``, less
sensitive to other processes on a shared machine) over ``--runs`` runs; then the total of the
medians plus the trace loading time, and the peak resident memory of the process
(``resource.getrusage``). Budget (issue 3): under 60 s in total, under 1 GB. Not a test: nothing
is asserted, the numbers are printed with the machine.

Run: ``python benchmarks/bench_sim.py [--runs N] [--cluster 128x8] [--policies a,b]``
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli_args import policy_names, positive_int  # benchmarks/cli_args.py
from machine import machine  # benchmarks/machine.py

from scheduling.core.policies import get_policy  # noqa: E402
from scheduling.datapaths import trace_path  # noqa: E402
from scheduling.profiles import load_default_profile  # noqa: E402
from scheduling.sim.cli import DEFAULT_POLICIES, CliError, build_cluster, parse_cluster  # noqa: E402
from scheduling.sim.engine import SimConfig, simulate  # noqa: E402
from scheduling.sim.loaders import TraceError, load_traces  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive_int, default=3, help="runs per policy (median reported)")
    parser.add_argument("--cluster", default="128x8", help="NODESxGPUS")
    parser.add_argument("--trace", default="chronus-philly-mix1.csv", help="trace file name under traces/")
    parser.add_argument(
        "--policies", type=policy_names, default=DEFAULT_POLICIES, help="the issue's six by default"
    )
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    try:
        cluster = build_cluster(parse_cluster(args.cluster), 49_140, "v100")
    except CliError as exc:
        parser.exit(2, f"error: {exc}\n")
    profile = load_default_profile()

    t0 = time.perf_counter()
    try:
        trace = load_traces(trace_path(args.trace), max_gpus=cluster.healthy_gpus)
    except TraceError as exc:  # e.g. the data folder absent: one line, the hint to SHAREWISE_DATA_DIR
        parser.exit(2, f"error: {exc}\n")
    load_s = time.perf_counter() - t0
    print(f"machine: {machine()}")
    print(
        f"trace {trace.name}: {trace.rows} rows, {len(trace.jobs)} jobs, rejected {trace.rejected}; "
        f"loaded in {load_s:.2f} s"
    )
    print(f"cluster {args.cluster} ({cluster.size} GPUs); rounds every 60 s; {args.runs} run(s) per policy")
    print(
        f"{'policy':10} {'wall s (median)':>16} {'cpu s (median)':>15} {'rounds':>7} {'preempt':>8} "
        f"{'finished':>9} {'avg JCT s':>10}"
    )
    total_wall = total_cpu = load_s
    for name in args.policies:
        walls, cpus = [], []
        result = None
        for _ in range(args.runs):
            w0, c0 = time.perf_counter(), time.process_time()
            result = simulate(trace.jobs, cluster, get_policy(name), profile, SimConfig())
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0)
        assert result is not None  # --runs is at least 1
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        total_wall += wall
        total_cpu += cpu
        avg = statistics.fmean(o.jct_s for o in result.outcomes)
        print(
            f"{name:10} {wall:16.2f} {cpu:15.2f} {result.rounds:7d} {result.preemptions:8d} "
            f"{len(result.outcomes):9d} {avg:10,.0f}",
            flush=True,
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"total (load + medians): wall {total_wall:.1f} s, cpu {total_cpu:.1f} s (budget 60 s); "
        f"peak RSS {peak_mb:.0f} MB (budget 1024 MB)"
    )


if __name__ == "__main__":
    main()
