"""How the simulator's cost grows with the number of jobs, optionally beside another checkout.

Scenario: the first ``n`` jobs (in submit order) of ``chronus-philly-mix1.csv`` for each ``n`` of
``--sizes`` (``all``: the whole trace, 30,756 jobs), on ``--cluster`` (default 16 × 8 V100s:
loaded, so queues grow with ``n``), rounds every 60 s, the shipped default profile, each policy
of ``--policies``. Every (size, policy) is simulated ``--runs`` times, each run a fresh process
(``python -c``, the checkout's own code); with ``--baseline PATH`` (another checkout of this
repository, e.g. ``git worktree add PATH/TO/old main``) each run of ours is followed by one of the
baseline, so both see the same machine load. The time is that of ``simulate`` alone (trace
loading excluded): wall (``time.perf_counter``) and CPU (``time.process_time``, less sensitive
to other processes on a shared machine). Printed: medians, rounds, the CPU time per job, the
growth exponent between consecutive sizes (``log(t2/t1) / log(n2/n1)``: 1 is linear, n log n is
a little above 1), the baseline's medians and the ratio baseline ÷ ours, and the total over all
rows. Not a test: nothing is asserted.

Run: ``python benchmarks/bench_scaling.py [--sizes 5000,10000,20000,30000]
[--policies sjf-bsbf,tiresias] [--cluster 16x8] [--runs 3] [--baseline PATH]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli_args import policy_names, positive_int  # benchmarks/cli_args.py
from machine import machine  # benchmarks/machine.py

from common.shapes import ShapeError, parse_shape  # noqa: E402
from scheduling.datapaths import REPO_ROOT, trace_path  # noqa: E402

CHILD = """
import json, sys, time
from scheduling.core.policies import get_policy
from scheduling.core.types import Cluster
from scheduling.datapaths import trace_path
from scheduling.profiles import load_default_profile
from scheduling.sim.engine import SimConfig, simulate
from scheduling.sim.loaders import load_traces
name, size, nodes, per_node = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cluster = Cluster.uniform(nodes, per_node)
trace = load_traces(trace_path("chronus-philly-mix1.csv"), max_gpus=cluster.healthy_gpus)
jobs = trace.jobs if size == "all" else sorted(trace.jobs, key=lambda j: (j.submit_time, j.id))[: int(size)]
w0, c0 = time.perf_counter(), time.process_time()
result = simulate(jobs, cluster, get_policy(name), load_default_profile(), SimConfig())
print(json.dumps({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0,
                  "rounds": result.rounds, "jobs": len(jobs),
                  "jct": sum(o.jct_s for o in result.outcomes) / max(len(result.outcomes), 1)}))
"""


def run_child(root: Path, policy: str, size: str, nodes: int, per_node: int) -> dict:
    """One simulation in a fresh process of the checkout at ``root``; its measured numbers."""
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, policy, size, str(nodes), str(per_node)],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def job_counts(text: str) -> list[str]:
    """``--sizes``: comma-separated job counts (integers ≥ 1) or ``all`` (the whole trace), at
    least one (an ``argparse`` type: a bad one is a one-line error)."""
    sizes = [size for size in text.split(",") if size]
    for size in sizes:
        if size != "all" and not (size.isdigit() and int(size) >= 1):
            raise argparse.ArgumentTypeError(f"a job count must be an integer ≥ 1 or 'all', got {size!r}")
    if not sizes:
        raise argparse.ArgumentTypeError(f"names no size: {text!r}")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", type=job_counts, default="5000,10000,20000,30000", help="job counts (all: the whole trace)"
    )
    parser.add_argument(
        "--policies", type=policy_names, default="sjf-bsbf,tiresias", help="comma-separated policy names"
    )
    parser.add_argument("--cluster", default="16x8", help="NODESxGPUS")
    parser.add_argument("--runs", type=positive_int, default=3, help="runs per row (medians)")
    parser.add_argument("--baseline", type=Path, help="another checkout, run interleaved with ours")
    args = parser.parse_args()
    try:  # one shape only: a baseline checkout may predate node groups of GPU types
        nodes, per_node = parse_shape(args.cluster)
    except ShapeError as exc:
        parser.exit(2, f"error: bad --cluster {args.cluster!r}: {exc}\n")
    if not trace_path("chronus-philly-mix1.csv").is_file():  # the children would fail one by one
        parser.exit(
            2, f"error: trace not found: {trace_path('chronus-philly-mix1.csv')} (set SHAREWISE_DATA_DIR)\n"
        )
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f} at the start")
    print(
        f"chronus-philly-mix1.csv prefixes on {args.cluster}, rounds every 60 s; {args.runs} run(s) per row"
        + (", interleaved with the baseline" if args.baseline else "")
    )
    header = f"{'policy':9} {'jobs':>6} {'rounds':>6} {'wall s':>8} {'cpu s':>8} {'ms/job':>7} {'growth':>6}"
    if args.baseline:
        header += f" {'base wall':>9} {'base cpu':>9} {'cpu x':>6} {'same JCT':>8}"
    print(header)
    totals = [0.0, 0.0, 0.0, 0.0]
    for policy in args.policies:
        previous: tuple[int, float] | None = None
        for size in args.sizes:
            ours: list[dict] = []
            base: list[dict] = []
            for _ in range(args.runs):
                ours.append(run_child(REPO_ROOT, policy, size, nodes, per_node))
                if args.baseline:
                    base.append(run_child(args.baseline.resolve(), policy, size, nodes, per_node))
            wall = statistics.median(r["wall"] for r in ours)
            cpu = statistics.median(r["cpu"] for r in ours)
            jobs = ours[0]["jobs"]
            growth = (
                f"{math.log(cpu / previous[1]) / math.log(jobs / previous[0]):6.2f}"
                if previous and jobs > previous[0]
                else f"{'':6}"
            )
            previous = (jobs, cpu)
            totals[0] += wall
            totals[1] += cpu
            line = (
                f"{policy:9} {jobs:6d} {ours[0]['rounds']:6d} {wall:8.2f} {cpu:8.2f} "
                f"{1000 * cpu / jobs:7.3f} {growth}"
            )
            if base:
                base_wall = statistics.median(r["wall"] for r in base)
                base_cpu = statistics.median(r["cpu"] for r in base)
                totals[2] += base_wall
                totals[3] += base_cpu
                same = base[0]["jct"] == ours[0]["jct"] and base[0]["rounds"] == ours[0]["rounds"]
                line += f" {base_wall:9.2f} {base_cpu:9.2f} {base_cpu / cpu:6.2f} {str(same):>8}"
            print(line, flush=True)
    total = f"total (medians summed): wall {totals[0]:.1f} s, cpu {totals[1]:.1f} s"
    if args.baseline:
        total += f"; baseline wall {totals[2]:.1f} s, cpu {totals[3]:.1f} s"
    print(total + f"; load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
