"""Multi-tenant fairness table (issue 6): quotas, starvation bound and fairness on real tenants.

Runs the simulator (``scheduling.sim``) on the real multi-tenant traces of the shared data folder:

- ``traces/philly-vc/`` — 15 Philly virtual clusters (tenant = file name), Gavel format;
- ``traces/chronus-philly-mix1.csv`` — 11 Philly VCs (tenant = ``user``), Chronus format;

under fifo, tiresias, sjf-ffs, sjf-bsbf and sjf-bsbf-fair, every policy with the same tenant
quotas (the service honours quotas in every policy), plus ``sjf-bsbf`` without quotas as the
paper's reference. Prints per policy: average and p99 JCT, max and p99 wait (total time pending),
Jain's index of the tenants' normalised shares ``1/ρ``, the largest finish-time fairness ρ
(Themis; independent run = the tenant alone on its guaranteed GPUs under sjf-bsbf), guarantee
violations (jobs that stayed longer than ``--grace-s`` able to start within their tenant's unused
guarantee but for GPUs other tenants borrowed, checked at every round the simulator runs), rounds
with a tenant above its cap, and preemptions.

Quota rule (``--quota-rule``): ``demand`` (default) — each tenant's guarantee is proportional to
its demand (Σ GPUs × exclusive run time of its jobs), ``helios`` — proportional to the GPUs of the
Venus virtual clusters of ``quotas/helios-venus-vc-gpus.csv`` on its first day, the largest VC
given to the most demanding tenant and so on; both scaled to the cluster's GPUs by largest
remainder. Borrowing is unlimited (borrow limit ``None``).

Usage::

    python benchmarks/fairness_table.py [--only philly|chronus] [--json out.json]

Progress bars on stderr; the table (and the machine) on stdout.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from machine import machine  # noqa: E402  (benchmarks/machine.py)

from common.shapes import ShapeError, node_names, parse_shape  # noqa: E402
from scheduling.core.fairness import (  # noqa: E402
    jain_of_rho,
    tenant_rho,
    usage_vs_quota,
    wait_stats,
)
from scheduling.core.metrics import jct_summary, makespan_window  # noqa: E402
from scheduling.core.policies import UnknownPolicyError, get_policy  # noqa: E402
from scheduling.core.types import (  # noqa: E402
    FAIR_SWITCHES,
    GPU,
    Cluster,
    Job,
    Profile,
    SchedulerConfig,
    TenantQuota,
    fair_switches_off,
)
from scheduling.datapaths import shared_data_dir  # noqa: E402
from scheduling.profiles import load_default_profile  # noqa: E402
from scheduling.sim import engine, sweep  # noqa: E402
from scheduling.sim.cli import Watched  # noqa: E402
from scheduling.sim.loaders import TraceError, load_traces  # noqa: E402
from scheduling.sim.quotas import demand_gpu_s, proportional_quotas  # noqa: E402

TRACES = {"philly": ("traces/philly-vc", "40x8"), "chronus": ("traces/chronus-philly-mix1.csv", "16x8")}
POLICIES = "fifo,tiresias,sjf-ffs,sjf-bsbf,sjf-bsbf-fair"
REFERENCE = "sjf-bsbf"
DEFAULTS = SchedulerConfig()


def helios_weights(tenants_by_demand: Sequence[str]) -> dict[str, float]:
    """The Venus VC sizes of the first day, largest first, matched to tenants by demand rank."""
    path = shared_data_dir() / "quotas" / "helios-venus-vc-gpus.csv"
    with path.open(newline="") as f:
        row = next(csv.DictReader(f))
    sizes = sorted((int(v) for k, v in row.items() if k.startswith("vc") and int(v) > 0), reverse=True)
    if len(sizes) < len(tenants_by_demand):
        raise SystemExit(f"{path.name}: {len(sizes)} non-empty VCs for {len(tenants_by_demand)} tenants")
    return {t: float(s) for t, s in zip(tenants_by_demand, sizes, strict=False)}


def quotas_for(jobs: Sequence[Job], gpus: int, rule: str) -> dict[str, TenantQuota]:
    need = demand_gpu_s(jobs)
    weights = need if rule == "demand" else helios_weights(sorted(need, key=lambda t: (-need[t], t)))
    return proportional_quotas(weights, gpus)


def partition(gpus: int, per_node: int) -> Cluster:
    """``gpus`` GPUs on nodes of ``per_node`` (the last node may be smaller), named as every cluster."""
    names = node_names(math.ceil(gpus / per_node))
    return Cluster(tuple(GPU(i, names[i // per_node], i % per_node, 49_140) for i in range(gpus)))


@dataclass(frozen=True)
class Alone:
    """One tenant alone on ``size`` GPUs under sjf-bsbf (Themis' T_id): a task of the sweep."""

    jobs: tuple[Job, ...]
    size: int
    per_node: int
    config: engine.SimConfig


@dataclass(frozen=True)
class PolicyRun:
    """One policy over the whole trace, watched for guarantee violations: a task of the sweep."""

    label: str
    policy: str
    jobs: tuple[Job, ...]
    cluster: Cluster
    quotas: Mapping[str, TenantQuota]
    config: engine.SimConfig
    grace_s: float
    progress: bool


def run_task(task: Alone | PolicyRun) -> dict:
    """Simulate one task (in whichever process the sweep gives it); a picklable dict of results."""
    profile = load_default_profile()
    if isinstance(task, Alone):
        cluster = partition(task.size, task.per_node)
        return {
            "outcomes": engine.simulate(
                task.jobs, cluster, get_policy(REFERENCE), profile, task.config
            ).outcomes
        }
    monitor = Watched(get_policy(task.policy), task.quotas, task.grace_s)
    started = time.process_time()
    result = engine.simulate(task.jobs, task.cluster, monitor, profile, task.config, progress=task.progress)
    return {
        "outcomes": result.outcomes,
        "guarantee_violations": len(monitor.monitor.violated),
        "longest_owner_block_s": monitor.monitor.longest_s,
        "cap_violation_rounds": monitor.monitor.cap_snapshots,
        "preemptions": result.preemptions,
        "unfinished": len(result.unfinished),
        "rounds": result.rounds,
        "cpu_s": time.process_time() - started,
    }


def plan_trace(key: str, args: argparse.Namespace, profile: Profile) -> tuple[dict, list[Alone | PolicyRun]]:
    """The report's header of trace ``key`` and the sweep's tasks for it (tenants alone, then policies)."""
    rel, default_cluster = TRACES[key]
    shape = getattr(args, f"{key}_cluster") or default_cluster
    try:
        nodes, per_node = parse_shape(shape)
    except ShapeError as exc:
        raise SystemExit(f"--{key}-cluster {shape!r}: {exc}") from None
    cluster = Cluster.uniform(nodes, per_node)
    try:
        trace = load_traces(
            shared_data_dir() / rel, max_gpus=cluster.healthy_gpus, throughput=profile.isolated_throughput
        )
    except TraceError as exc:
        raise SystemExit(f"{rel}: {exc}") from None
    jobs = tuple(trace.jobs[: args.max_jobs] if args.max_jobs else trace.jobs)
    quotas = quotas_for(jobs, cluster.size, args.quota_rule)
    scheduler = SchedulerConfig(
        starvation_bound_s=args.starvation_bound_s,
        aging_s=args.aging_s,
        reclaim=args.reclaim,
        borrow_bound_s=args.borrow_bound_s,
        **fair_switches_off(args.off),
    )
    base = engine.SimConfig(scheduler=scheduler, restart_cost_s=args.restart_cost_s)
    by_tenant: dict[str, list[Job]] = {}
    for j in jobs:
        by_tenant.setdefault(j.tenant, []).append(j)
    tasks: list[Alone | PolicyRun] = [
        Alone(
            tuple(own),
            max(quotas[tenant].guaranteed_gpus, max(j.gpus for j in own)),
            per_node,
            replace(base, tenant_quotas={}),
        )
        for tenant, own in sorted(by_tenant.items())
    ]
    # Inner progress bars only when the runs are one after the other in this process.
    inner = not args.no_progress and args.workers == 1 and not args.dask
    runs = [(name, True) for name in args.policies] + ([] if args.no_reference else [(REFERENCE, False)])
    for name, with_quotas in runs:
        label = name if with_quotas else f"{name} (no quotas)"
        config = replace(base, tenant_quotas=quotas if with_quotas else {})
        tasks.append(PolicyRun(label, name, jobs, cluster, quotas, config, args.grace_s, inner))
    header = {
        "trace": trace.name,
        "jobs": len(jobs),
        "cluster": f"{nodes}x{per_node}",
        "gpus": cluster.size,
        "quota_rule": args.quota_rule,
        "quotas": {t: q.guaranteed_gpus for t, q in sorted(quotas.items())},
        "grace_s": args.grace_s,
        "scheduler": {
            "starvation_bound_s": args.starvation_bound_s,
            "aging_s": args.aging_s,
            "reclaim": args.reclaim,
            "borrow_bound_s": args.borrow_bound_s,
        }
        | ({"off": sorted(fair_switches_off(args.off))} if args.off else {}),
    }
    return header, tasks


def assemble(header: dict, tasks: Sequence[Alone | PolicyRun], results: Sequence[dict]) -> dict:
    """The trace's report from its tasks' results (in the tasks' order): one row per policy run."""
    alone = [o for t, r in zip(tasks, results, strict=True) if isinstance(t, Alone) for o in r["outcomes"]]
    rows: dict[str, dict] = {}
    for task, r in zip(tasks, results, strict=True):
        if not isinstance(task, PolicyRun):
            continue
        outs = r["outcomes"]
        rho = tenant_rho(outs, alone)
        lo, hi = makespan_window(outs)
        rows[task.label] = {
            **jct_summary(outs),
            **wait_stats(outs),
            "jain_rho": jain_of_rho(rho),
            "max_rho": max(rho.values(), default=math.nan),
            "rho": rho,
            **{k: v for k, v in r.items() if k not in ("outcomes", "cpu_s")},
            "usage_vs_quota": usage_vs_quota(outs, task.quotas, hi - lo),
            "cpu_s": r["cpu_s"],
        }
    return {**header, "rows": rows}


def format_table(report: dict) -> str:
    h = 3600.0
    sc = report["scheduler"]
    lines = [
        f"{report['trace']}: {report['jobs']} jobs, {len(report['quotas'])} tenants, cluster "
        f"{report['cluster']} = {report['gpus']} GPUs, quotas ∝ {report['quota_rule']} (borrowing "
        f"unlimited), grace {report['grace_s']:.0f} s, starvation bound "
        f"{sc['starvation_bound_s'] / h:g} h, aging {sc['aging_s'] / h:g} h, reclaim {sc['reclaim']}, "
        f"borrow bound {sc['borrow_bound_s'] / h:g} h"
        + (f", off: {', '.join(sc['off'])}" if sc.get("off") else ""),
        f"{'policy':<24} {'avg JCT h':>9} {'p99 JCT h':>9} {'max wait h':>10} {'p99 wait h':>10} "
        f"{'Jain 1/ρ':>8} {'max ρ':>7} {'guar.viol':>9} {'cap viol':>8} {'preempt':>7} {'unfin':>5}",
    ]
    for name, r in report["rows"].items():
        lines.append(
            f"{name:<24} {r['avg_jct_s'] / h:>9.2f} {r['p99_jct_s'] / h:>9.1f} "
            f"{r['max_wait_s'] / h:>10.1f} {r['p99_wait_s'] / h:>10.1f} {r['jain_rho']:>8.3f} "
            f"{r['max_rho']:>7.2f} {r['guarantee_violations']:>9d} {r['cap_violation_rounds']:>8d} "
            f"{r['preemptions']:>7d} {r['unfinished']:>5d}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=sorted(TRACES), help="run one trace only")
    parser.add_argument("--philly-cluster", metavar="NODESxGPUS", help=f"default {TRACES['philly'][1]}")
    parser.add_argument("--chronus-cluster", metavar="NODESxGPUS", help=f"default {TRACES['chronus'][1]}")
    parser.add_argument("--policies", default=POLICIES)
    parser.add_argument("--quota-rule", choices=("demand", "helios"), default="demand")
    parser.add_argument("--reclaim", choices=("preempt", "bound", "both"), default="preempt")
    parser.add_argument("--starvation-bound-s", type=float, default=DEFAULTS.starvation_bound_s)
    parser.add_argument("--aging-s", type=float, default=DEFAULTS.aging_s)
    parser.add_argument("--borrow-bound-s", type=float, default=DEFAULTS.borrow_bound_s)
    parser.add_argument("--restart-cost-s", type=float, default=engine.DEFAULT_RESTART_COST_S)
    parser.add_argument(
        "--off",
        default="",
        metavar="SWITCHES",
        help=f"sjf-bsbf-fair switches to turn off, comma-separated: {', '.join(FAIR_SWITCHES)}",
    )
    parser.add_argument(
        "--grace-s",
        type=float,
        default=120.0,
        help="an owner waiting longer than this for lent GPUs is a guarantee violation",
    )
    parser.add_argument("--max-jobs", type=int, default=0, help="first N jobs only (quick checks)")
    parser.add_argument("--json", type=Path, help="write the full report (per-tenant ρ and usage) here")
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help=f"skip the {REFERENCE} run without quotas (to split policies over processes)",
    )
    parser.add_argument("--no-progress", action="store_true")
    sweep.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        args.policies = [get_policy(n.strip()).name for n in args.policies.split(",") if n.strip()]
        SchedulerConfig(
            starvation_bound_s=args.starvation_bound_s,
            aging_s=args.aging_s,
            borrow_bound_s=args.borrow_bound_s,
            **fair_switches_off(args.off),
        )
    except (UnknownPolicyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    profile = load_default_profile()
    print(f"machine: {machine()}; {'Dask ' + args.dask if args.dask else f'{args.workers} worker(s)'}")
    plans = [plan_trace(key, args, profile) for key in ([args.only] if args.only else list(TRACES))]
    tasks = [t for _, trace_tasks in plans for t in trace_tasks]
    try:
        results = sweep.run_tasks(
            run_task, tasks, workers=args.workers, dask=args.dask, desc="runs", progress=not args.no_progress
        )
    except sweep.SweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    reports, at = [], 0
    for header, trace_tasks in plans:
        report = assemble(header, trace_tasks, results[at : at + len(trace_tasks)])
        at += len(trace_tasks)
        reports.append(report)
        print(format_table(report), flush=True)
        print()
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
