"""Belief vs truth (issue 10, docs/LEARNING.md §5): SJF-BSBF with an oracle profile, a prior whose
slowdowns are off by a stated error, and that prior learning from the jobs' reports.

Runs the simulator (``scheduling.sim``) on the shared data folder's

- ``traces/muri-testbed-400.csv`` on 8 × 8 GPUs of 49,140 MB;
- ``traces/chronus-philly-mix1.csv`` on 16 × 8 GPUs of 49,140 MB;
- and, only when asked (``--only testbed``), ``traces/sjfbsbf-testbed-61.csv`` on 4 × 8 GPUs: the
  smallest input, a minute's check that the table runs;

under ``sjf-bsbf`` in four modes, the truth always the shipped table:

- ``oracle``: the policy believes the truth (the simulator's default);
- ``prior only``: the policy's slowdowns are the truth's times a factor uniform in
  ``[1 − E, 1 + E]`` per ordered pair of job types (``--error``, seeded), never corrected;
- ``learning``: the same prior, learning from the jobs' reports (``scheduling.core.learning``);
- ``learning, exact prior``: learning over the truth (what learning costs when nothing is wrong).

Prints per run: average JCT and its difference to the oracle's, share decisions (starts with
co-location), the regretted ones (with the true ξ and remaining times, ``T_con ≥ T_seq``: better
to have waited), ξ prediction error (MAPE) of the first and last tenth of the decided pairs, the
reports fed to the learner and the CPU seconds of the run; then, per trace, the means over the
seeds and whether the targets hold (learning within 3 % of the oracle's average JCT, regretted
decisions at most half of the prior-only run's); the machine and the command.

Usage::

    python benchmarks/learning_table.py [--only muri|chronus|testbed] [--seeds 0,1,2] [--error 0.3]
        [--noise 0] [--json out.json] [--workers N | --dask tcp://host:port]

The runs go to ``--workers`` processes (default: the cores) or a Dask scheduler; the rows are the
same as a serial run's (``--workers 1``), CPU seconds aside.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cli_args import fraction, non_negative_float  # noqa: E402  (benchmarks/cli_args.py)
from machine import machine  # noqa: E402  (benchmarks/machine.py)

from scheduling.core.policies import get_policy  # noqa: E402
from scheduling.core.types import Cluster  # noqa: E402
from scheduling.datapaths import shared_data_dir  # noqa: E402
from scheduling.profiles import load_default_profile  # noqa: E402
from scheduling.sim import sweep  # noqa: E402
from scheduling.sim.belief import Belief  # noqa: E402
from scheduling.sim.engine import SimConfig, simulate  # noqa: E402
from scheduling.sim.loaders import TraceError, load_traces  # noqa: E402
from scheduling.sim.perturbed import PerturbedProfile  # noqa: E402

TRACES = {
    "muri": ("traces/muri-testbed-400.csv", 8, 8),
    "chronus": ("traces/chronus-philly-mix1.csv", 16, 8),
    "testbed": ("traces/sjfbsbf-testbed-61.csv", 4, 8),
}
#: The traces of the table when ``--only`` is not given (the testbed is a smoke-size input).
DEFAULT_TRACES = ("muri", "chronus")
MEMORY_MB = 49_140
POLICY = "sjf-bsbf"
MODES = ("oracle", "prior only", "learning", "learning, exact prior")


def run_one(task: tuple[str, tuple, Cluster, str, float, int, float]) -> dict[str, Any]:
    """One simulation ``(trace name, jobs, cluster, mode, error, seed, noise)``; the row as a dict (s)."""
    name, jobs, cluster, mode, error, seed, noise = task
    truth = load_default_profile()
    prior = (
        truth
        if mode in ("oracle", "learning, exact prior")
        else PerturbedProfile(truth, error, seed, "prior")
    )
    learn = mode.startswith("learning")
    belief = Belief(truth, prior, learn=learn, measure_noise=noise if learn else 0.0, seed=seed)
    t0 = time.process_time()
    result = simulate(jobs, cluster, get_policy(POLICY), truth, SimConfig(seed=seed), belief=belief)
    cpu = time.process_time() - t0
    s = result.learning
    assert s is not None
    return {
        "trace": name,
        "mode": mode,
        "seed": seed,
        "avg_jct_s": statistics.fmean(o.jct_s for o in result.outcomes),
        "unfinished": len(result.unfinished),
        "decisions": s.decisions,
        "regretted": s.regretted,
        "xi_mape": s.xi_mape,
        "xi_mape_parts": list(s.xi_mape_parts),
        "part_end_s": list(s.part_end_s),
        "reports": s.slowdown_reports + s.exclusive_reports,
        "profiles_built": s.profiles_built,
        "cpu_s": cpu,
    }


def pct(value: float) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.1%}"


def format_rows(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'trace':<8} {'mode':<22} {'seed':>4} {'avg JCT s':>10} {'vs oracle':>9} {'shares':>7} "
        f"{'regretted':>9} {'ξ MAPE 1st':>10} {'last 10th':>9} {'reports':>8} {'CPU s':>6}"
    )
    lines = [head, "-" * len(head)]
    oracle = {r["trace"]: r["avg_jct_s"] for r in rows if r["mode"] == "oracle"}
    for r in rows:
        gap = r["avg_jct_s"] / oracle[r["trace"]] - 1 if r["trace"] in oracle else math.nan
        lines.append(
            f"{r['trace']:<8} {r['mode']:<22} {r['seed']:>4} {r['avg_jct_s']:>10,.0f} {gap:>+9.1%} "
            f"{r['decisions']:>7,} {r['regretted']:>9,} {pct(r['xi_mape_parts'][0]):>10} "
            f"{pct(r['xi_mape_parts'][-1]):>9} {r['reports']:>8,} {r['cpu_s']:>6.1f}"
        )
    return "\n".join(lines)


def format_targets(rows: list[dict[str, Any]]) -> str:
    """Per trace: the means over seeds of prior only and learning, and the two targets."""
    lines = []
    for trace in dict.fromkeys(r["trace"] for r in rows):
        of = {m: [r for r in rows if r["trace"] == trace and r["mode"] == m] for m in MODES}
        if not (of["oracle"] and of["prior only"] and of["learning"]):
            continue
        oracle = of["oracle"][0]["avg_jct_s"]
        mean = {m: statistics.fmean(r["avg_jct_s"] for r in of[m]) for m in ("prior only", "learning")}
        regret = {m: sum(r["regretted"] for r in of[m]) for m in ("prior only", "learning")}
        gap = mean["learning"] / oracle - 1
        cut = 1 - regret["learning"] / regret["prior only"] if regret["prior only"] else math.nan
        series = " ".join(pct(x) for x in of["learning"][0]["xi_mape_parts"])
        prior_gap = mean["prior only"] / oracle - 1
        halved = "n/a" if math.isnan(cut) else "met" if cut >= 0.5 else "MISSED"
        lines += [
            f"{trace}: over {len(of['learning'])} seed(s) — avg JCT prior only {mean['prior only']:,.0f} s "
            f"({prior_gap:+.1%} vs oracle), learning {mean['learning']:,.0f} s ({gap:+.1%}); "
            f"regretted {regret['prior only']} → {regret['learning']} ({pct(cut)} fewer)",
            f"  target learning within 3 % of oracle: {'met' if abs(gap) <= 0.03 else 'MISSED'}; "
            f"regretted cut by at least half: {halved}",
            f"  ξ MAPE of learning (seed {of['learning'][0]['seed']}) by tenth of its decided pairs: "
            f"{series}",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the table; returns 2 with a message when a trace is missing."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(TRACES), help="one trace only")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds of the prior's error")
    parser.add_argument(
        "--error", type=fraction, default=0.3, help="relative error E of the prior's slowdowns"
    )
    parser.add_argument(
        "--noise", type=non_negative_float, default=0.0, help="measurement noise S (ln standard deviation)"
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    parser.add_argument("--no-progress", action="store_true")
    sweep.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds: comma-separated whole numbers expected, got {args.seeds!r}")
    if not seeds:
        parser.error("--seeds: at least one seed is needed")
    print(f"machine: {machine()}; {'Dask ' + args.dask if args.dask else f'{args.workers} worker(s)'}")
    given = " ".join(argv if argv is not None else sys.argv[1:])
    print(f"command: python benchmarks/learning_table.py {given}".rstrip())
    tasks = []
    for name, (path, nodes, per_node) in TRACES.items():
        if name != args.only if args.only else name not in DEFAULT_TRACES:
            continue
        cluster = Cluster.uniform(nodes, per_node, MEMORY_MB)
        try:
            trace = load_traces(
                [shared_data_dir() / path],
                max_gpus=cluster.healthy_gpus,
                throughput=load_default_profile().isolated_throughput,
            )
        except TraceError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        jobs = tuple(trace.jobs)
        for mode in MODES:
            for seed in seeds if mode in ("prior only", "learning") else seeds[:1]:
                tasks.append((name, jobs, cluster, mode, args.error, seed, args.noise))
    try:
        rows = sweep.run_tasks(
            run_one, tasks, workers=args.workers, dask=args.dask, desc="runs", progress=not args.no_progress
        )
    except sweep.SweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{POLICY}, rounds every 60 s, GPUs of {MEMORY_MB:,} MB, prior error ±{args.error:.0%}, "
        f"measurement noise {args.noise:g}, reports after 30 s of a co-location"
    )
    print(format_rows(rows))
    print(format_targets(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
