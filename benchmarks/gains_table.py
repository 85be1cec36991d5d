"""Where SJF-BSBF's gains come from: it against Tiresias and SJF-FFS under each preset and each
profile, with the makespan bound of any exclusive-GPU schedule (docs/FIDELITY.md §5).

Usage::

    python benchmarks/gains_table.py [--traces NAME:NODESxGPUS,...] [--presets ours,muri-sim,...]
        [--workers N | --dask tcp://host:port]

For every trace (default: the 61-job testbed trace on 4 × 8, the 400-job testbed trace and the
three Muri simulation traces on 8 × 8) and every preset (``ours`` = no preset), it simulates
Tiresias once and SJF-FFS and SJF-BSBF under each profile:

- ``shipped``: the shipped V100 profile, which maps every trace model onto a measured Gavel
  family (vgg16/vgg19 → ResNet-50, shufflenet → ResNet-18, bert/gpt2 → Transformer, dqn/a2c →
  A3C; ``scheduling/profiles/default.json``, ``model_families``) and shares on that family's
  measured or predicted slowdowns;
- ``strict``: the same profile, but a job may share only if its model was measured itself (its
  family is its own model: of these traces' models only resnet18 → ResNet-18), so every other
  job runs alone (:class:`StrictProfile`);
- the learned profile of the closed-loop work (docs/LEARNING.md) is not run here: its row in
  docs/FIDELITY.md is left to fill.

Printed as a Markdown table: average JCT of each, SJF-BSBF's reduction against each, and its
makespan against the bound ``Σ G_j · P_j ÷ GPUs`` (GPU-seconds of exclusive work at the full
batch ÷ GPUs: no schedule that gives each job its GPUs alone can end sooner after the first
submission); a ratio above 1 is the least factor by which sharing raised the cluster's
throughput. Not a test: nothing is asserted. Several minutes on one core; ``--workers N`` (default:
the cores) or ``--dask ADDRESS`` runs the simulations in parallel, the table the same.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli_args import names_among  # benchmarks/cli_args.py
from machine import machine  # benchmarks/machine.py

from scheduling.core.metrics import makespan, mean  # noqa: E402
from scheduling.core.policies import get_policy  # noqa: E402
from scheduling.core.profiles import TableProfile, normalise_model_name  # noqa: E402
from scheduling.core.types import Cluster, Job  # noqa: E402
from scheduling.datapaths import trace_path  # noqa: E402
from scheduling.profiles import load_default_profile  # noqa: E402
from scheduling.sim import sweep  # noqa: E402
from scheduling.sim.cli import CliError, build_cluster, parse_cluster  # noqa: E402
from scheduling.sim.engine import SimConfig, simulate  # noqa: E402
from scheduling.sim.loaders import TraceError, load_traces  # noqa: E402
from scheduling.sim.presets import PRESETS  # noqa: E402

PROFILES = ("shipped", "strict")
TRACES = (
    "sjfbsbf-testbed-61.csv:4x8,muri-testbed-400.csv:8x8,muri-sim-trace1.csv:8x8,"
    "muri-sim-trace3.csv:8x8,muri-sim-trace4.csv:8x8"
)


class StrictProfile:
    """The shipped profile, except that a pair may share only when both jobs' models were measured
    themselves (the family the profile maps the model to is that model, spelt any way)."""

    def __init__(self, base: TableProfile) -> None:
        self.base = base

    def __getattr__(self, name: str):
        return getattr(self.base, name)

    def own(self, job: Job) -> bool:
        """Whether ``job``'s model has measurements of its own (not a mapped family's)."""
        return normalise_model_name(self.base.family_of(job.model)) == normalise_model_name(job.model)

    def pair_allowed(self, a: Job, sub_a: int, b: Job, sub_b: int, unknown_ok: bool = False) -> bool:
        """The shipped rule, and both models measured themselves."""
        return self.own(a) and self.own(b) and self.base.pair_allowed(a, sub_a, b, sub_b, unknown_ok)


def pct(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.1f} %"


def run(task: tuple[tuple[Job, ...], Cluster, str, str, SimConfig]) -> tuple[float, float]:
    """(average JCT, makespan) s of one simulation ``(jobs, cluster, policy, profile label, config)``."""
    jobs, cluster, policy, label, config = task
    shipped = load_default_profile()
    profile = StrictProfile(shipped) if label == "strict" else shipped
    result = simulate(jobs, cluster, get_policy(policy), profile, config)
    return mean(o.jct_s for o in result.outcomes), makespan(result.outcomes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", default=TRACES, help="NAME:NODESxGPUS, comma-separated")
    parser.add_argument(
        "--presets",
        type=names_among(["ours", *PRESETS]),
        default="ours," + ",".join(PRESETS),
        help="ours = no preset",
    )
    parser.add_argument("--no-progress", action="store_true")
    sweep.add_arguments(parser)
    args = parser.parse_args()
    print(f"machine: {machine()}; {'Dask ' + args.dask if args.dask else f'{args.workers} worker(s)'}")
    t0 = time.perf_counter()
    cases, tasks = [], []  # one case per trace × preset: Tiresias, then SJF-FFS and SJF-BSBF per profile
    for item in args.traces.split(","):
        name, colon, shape = item.partition(":")  # the shape may hold colons itself (2x8:a100:81920)
        if not colon:
            parser.exit(
                2,
                f"error: --traces: each item is NAME:NODESxGPUS, e.g. {TRACES.split(',')[0]}; got {item!r}\n",
            )
        try:
            cluster = build_cluster(parse_cluster(shape), 49_140, "v100")
            jobs = tuple(load_traces(trace_path(name), max_gpus=cluster.healthy_gpus).jobs)
        except (CliError, TraceError) as exc:  # a bad shape, a trace not found: one line
            parser.exit(2, f"error: {exc}\n")
        for preset in args.presets:
            config = SimConfig() if preset == "ours" else PRESETS[preset].sim_config()
            factor = config.fidelity.iteration_time_factor
            bound = sum(j.gpus * j.iterations * j.iter_time_s * factor for j in jobs) / cluster.healthy_gpus
            cases.append((name, shape, preset, bound))
            tasks.append((jobs, cluster, "tiresias", "shipped", config))
            for label in PROFILES:
                tasks += [(jobs, cluster, policy, label, config) for policy in ("sjf-ffs", "sjf-bsbf")]
    try:
        results = iter(
            sweep.run_tasks(run, tasks, workers=args.workers, dask=args.dask, progress=not args.no_progress)
        )
    except sweep.SweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        "| trace | cluster | preset | profile | Tiresias | SJF-FFS | SJF-BSBF | vs Tiresias | vs SJF-FFS "
        "| SJF-BSBF makespan | exclusive bound | ratio |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, shape, preset, bound in cases:
        tiresias, _ = next(results)
        for label in PROFILES:
            (ffs, _), (bsbf, span) = next(results), next(results)
            row = f"| {name.removesuffix('.csv')} | {shape} | {preset} | {label} "
            row += f"| {tiresias:,.0f} | {ffs:,.0f} | {bsbf:,.0f} "
            row += f"| {pct(bsbf, tiresias)} | {pct(bsbf, ffs)} "
            print(f"{row}| {span:,.0f} | {bound:,.0f} | {bound / span:.2f} |")
    print(f"({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
