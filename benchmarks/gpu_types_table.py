"""Heterogeneous-cluster table (issue 11, GPU types): jobs that need the large GPU type on a
cluster of two types, and how long they wait against the starvation bound.

Default: a synthetic saturated stream on ``1x4:a100:81920,2x4:t4:16384`` (4 large, 8 small GPUs):
one 1-GPU job of any type (ResNet-50, batch 128, 9,000 MB per GPU, 600 iterations of 1 s) every
50 s for 4 h — 12 GPUs of demand on 12 GPUs — and three 4-GPU jobs that ask for ``a100``
(60,000 MB per GPU, 1,800 iterations of 1 s) at t = 1,200, 4,800 and 8,400 s. With ``--trace``:
a trace of the shared data folder instead, every ``--every``-th job (by trace id, gangs of at most
the large type's GPUs) asking for the large type, the others accepting any type.

Prints per policy: average JCT of all jobs, then for the jobs that need the large type and for the
others: average and maximum wait (total time pending, s), and how far the longest wait of a
large-type job went past the starvation bound (``--starvation-bound-s``, default 1,800 s): the
bound guarantees the order (the head starts once the jobs holding its GPUs when it became the
head have finished, docs/FAIRNESS.md §2), so up to one run of those jobs plus a round interval.

Usage::

    python benchmarks/gpu_types_table.py [--cluster 1x4:a100:81920,2x4:t4:16384]
        [--starvation-bound-s 1800] [--policies fifo,sjf-bsbf,sjf-bsbf-fair] [--json out.json]
    python benchmarks/gpu_types_table.py --trace traces/sjfbsbf-testbed-61.csv \\
        --cluster 2x8:a100:81920,4x8:t4:16384 --every 5

The table (and the machine) on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from statistics import mean

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.machine import machine  # noqa: E402
from common.shapes import ShapeError  # noqa: E402
from scheduling.core.policies import get_policy  # noqa: E402
from scheduling.core.types import Job, SchedulerConfig  # noqa: E402
from scheduling.datapaths import shared_data_dir  # noqa: E402
from scheduling.sim import engine  # noqa: E402
from scheduling.sim.cli import CliError, build_cluster, parse_cluster  # noqa: E402
from scheduling.sim.loaders import TraceError, load_traces  # noqa: E402


def synthetic_jobs(large: str) -> tuple[Job, ...]:
    """The default scenario (module docstring): 288 small jobs of any type, one every 50 s for
    4 h, and three 4-GPU jobs asking for ``large`` at t = 1,200, 4,800 and 8,400 s."""
    small = [Job(i, "small", "resnet50", 128, 1, 600, 50.0 * i, 1.0, 9_000.0) for i in range(4 * 3600 // 50)]
    big = [
        Job(10_000 + k, "large", "resnet50", 128, 4, 1_800, t, 1.0, 60_000.0, gpu_types=(large,))
        for k, t in enumerate((1_200.0, 4_800.0, 8_400.0))
    ]
    return tuple(small + big)


def run(args: argparse.Namespace) -> dict:
    """Simulate each policy; returns the report (per policy: the figures of the table)."""
    from scheduling.profiles import load_default_profile

    cluster = build_cluster(parse_cluster(args.cluster), 49_140, "v100")
    types = sorted(
        {g.gpu_type for g in cluster.gpus},
        key=lambda t: -max(g.memory_mb for g in cluster.gpus if g.gpu_type == t),
    )
    large = types[0]
    large_gpus = sum(1 for g in cluster.gpus if g.gpu_type == large)
    profile = load_default_profile()
    if args.trace is None:
        name, jobs = "synthetic", synthetic_jobs(large)
    else:
        path = Path(args.trace)
        if not path.is_absolute():
            path = shared_data_dir() / path
        trace = load_traces([path], max_gpus=cluster.healthy_gpus, throughput=profile.isolated_throughput)
        name = path.name
        jobs = tuple(
            replace(j, gpu_types=(large,)) if j.id % args.every == 0 and j.gpus <= large_gpus else j
            for j in trace.jobs
        )
    needs = {j.id for j in jobs if j.gpu_types}
    config = engine.SimConfig(scheduler=SchedulerConfig(starvation_bound_s=args.starvation_bound_s))
    report: dict = {
        "trace": name,
        "cluster": args.cluster,
        "large_type": large,
        "starvation_bound_s": args.starvation_bound_s,
        "jobs": len(jobs),
        "large_type_jobs": len(needs),
        "policies": {},
    }
    for name in args.policies.split(","):
        result = engine.simulate(jobs, cluster, get_policy(name), profile, config)
        mine = [o.queue_s for o in result.outcomes if o.job_id in needs]
        rest = [o.queue_s for o in result.outcomes if o.job_id not in needs]
        report["policies"][name] = {
            "avg_jct_s": mean(o.jct_s for o in result.outcomes),
            "large_avg_wait_s": mean(mine) if mine else 0.0,
            "large_max_wait_s": max(mine, default=0.0),
            "large_beyond_bound_s": max(mine, default=0.0) - args.starvation_bound_s,
            "other_avg_wait_s": mean(rest) if rest else 0.0,
            "other_max_wait_s": max(rest, default=0.0),
            "unfinished": len(result.unfinished),
        }
    return report


def format_table(report: dict) -> str:
    """The markdown table of :func:`run`'s report."""
    lines = [
        f"trace {report['trace']} ({report['jobs']} jobs, {report['large_type_jobs']} need "
        f"{report['large_type']}); cluster {report['cluster']}; starvation bound "
        f"{report['starvation_bound_s']:,.0f} s",
        "",
        f"| policy | avg JCT s | {report['large_type']} jobs: avg wait s | max wait s | max − bound s "
        "| other jobs: avg wait s | max wait s | unfinished |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, p in report["policies"].items():
        keys = ("avg_jct_s", "large_avg_wait_s", "large_max_wait_s", "large_beyond_bound_s")
        keys += ("other_avg_wait_s", "other_max_wait_s")
        cells = " | ".join(f"{p[k]:,.0f}" for k in keys)
        lines.append(f"| {name} | {cells} | {p['unfinished']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", help="a trace of the shared data folder (default: the synthetic stream)")
    parser.add_argument("--cluster", default="1x4:a100:81920,2x4:t4:16384")
    parser.add_argument("--every", type=int, default=4, help="every N-th job (by id) needs the large type")
    parser.add_argument("--starvation-bound-s", type=float, default=1_800.0)
    parser.add_argument("--policies", default="fifo,sjf-bsbf,sjf-bsbf-fair")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.every < 1:
        print("error: --every must be ≥ 1", file=sys.stderr)
        return 2
    try:
        report = run(args)
    except (CliError, ShapeError, TraceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"machine: {machine()}")
    print(format_table(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
