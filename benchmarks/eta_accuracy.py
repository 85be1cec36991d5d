"""How wrong the estimated start times are: estimated vs actual start of every job of a trace.

The simulator replays the trace; at every round each waiting job gets the estimate the live
service would give it (``scheduling.core.eta.estimated_starts`` on that round's snapshot and
decisions, the same call ``scheduling.service.waiting.estimates_for`` makes), and once the job
has started its actual start is known. Reported per policy, over the jobs that waited at least
one round:

- the *first* estimate (what the job's submitter saw at the first round after submitting):
  error = estimated − actual start (s; negative: it started later than estimated), its median and
  90th percentile of |error|, the mean signed error, and the share within 5 and 15 minutes;
- *every* estimate (each round of each wait): the same, weighted by round.

Default scenario: the demo's input (``sjfbsbf-testbed-61.csv`` on 4 × 8 GPUs of 49,140 MB, rounds
every 60 s, the shipped profile, no quotas) under ``sjf-bsbf``, ``sjf`` and ``fifo``; with
``--demo-quotas`` the jobs are dealt to two tenants in turn with 16 guaranteed GPUs each, as the
demo does (``demo.workload``). Every round is run (no skipped rounds), so each waiting job is
estimated at each round it waits. Not a test: nothing is asserted; docs/API.md quotes the result.

Run: ``python benchmarks/eta_accuracy.py [--trace PATH] [--cluster 4x8] [--policies a,b]
[--demo-quotas] [--json F]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling.core.eta import estimate_mode, estimated_starts  # noqa: E402
from scheduling.core.metrics import percentile  # noqa: E402
from scheduling.core.policies import get_policy  # noqa: E402
from scheduling.core.types import (  # noqa: E402
    Cluster,
    Policy,
    Profile,
    RoundDecisions,
    Snapshot,
    TenantQuota,
)
from scheduling.datapaths import trace_path  # noqa: E402
from scheduling.profiles import load_default_profile  # noqa: E402
from scheduling.sim.cli import CliError, build_cluster, parse_cluster  # noqa: E402
from scheduling.sim.engine import SimConfig, simulate  # noqa: E402
from scheduling.sim.loaders import TraceError, load_traces  # noqa: E402


class Estimating:
    """A policy wrapper recording, at every round, the estimated start of each waiting job."""

    def __init__(self, inner: Policy, round_interval_s: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.mode = estimate_mode(inner)
        self.round_interval_s = round_interval_s
        self.estimates: dict[int, list[tuple[float, float]]] = defaultdict(list)  # job → [(round t, eta)]

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """The inner policy's decisions (with their waits, in its order); estimates recorded."""
        decisions = self.inner.decide(snapshot, profile, explain=True)
        if self.mode is not None:
            order = [w.job_id for w in decisions.waits]
            etas = estimated_starts(snapshot, decisions, profile, order, self.mode, self.round_interval_s)
            for job_id, eta in etas.items():
                self.estimates[job_id].append((snapshot.now, eta))
        return decisions


def summary(errors: list[float]) -> dict[str, float]:
    """Median and p90 of |error|, mean signed error (s), share within 5 and 15 min."""
    absolute = [abs(e) for e in errors]
    return {
        "n": len(errors),
        "median_abs_s": statistics.median(absolute),
        "p90_abs_s": percentile(absolute, 90),
        "mean_signed_s": statistics.fmean(errors),
        "within_5min": sum(a <= 300 for a in absolute) / len(absolute),
        "within_15min": sum(a <= 900 for a in absolute) / len(absolute),
    }


def measure(
    policy_name: str,
    jobs: Any,
    cluster: Cluster,
    profile: Profile,
    interval: float,
    quotas: dict[str, TenantQuota] | None = None,
) -> dict[str, Any]:
    """Simulate ``policy_name`` and compare its estimates with the actual starts."""
    wrapper = Estimating(get_policy(policy_name), interval)
    config = SimConfig(round_interval_s=interval, skip_idle_rounds=False, tenant_quotas=quotas or {})
    result = simulate(jobs, cluster, wrapper, profile, config)
    actual = {o.job_id: o.first_start for o in result.outcomes}
    first, every, waits = [], [], []
    for job_id, seen in wrapper.estimates.items():
        if job_id not in actual:
            continue
        first.append(seen[0][1] - actual[job_id])
        waits.append(actual[job_id] - seen[0][0])
        every.extend(eta - actual[job_id] for _, eta in seen)
    return {
        "policy": policy_name,
        "jobs": len(result.outcomes),
        "estimated_jobs": len(first),
        "median_wait_after_first_estimate_s": statistics.median(waits) if waits else 0.0,
        "first": summary(first) if first else {},
        "every": summary(every) if every else {},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=None, help="trace file (default: the demo's 61-job trace)")
    parser.add_argument("--cluster", default="4x8")
    parser.add_argument("--gpu-memory-mb", type=int, default=49_140)
    parser.add_argument("--round-interval", type=float, default=60.0)
    parser.add_argument("--policies", default="sjf-bsbf,sjf,fifo")
    parser.add_argument("--demo-quotas", action="store_true", help="two tenants, equal quotas (the demo's)")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args(argv)
    try:
        cluster = build_cluster(parse_cluster(args.cluster), args.gpu_memory_mb, "v100")
    except CliError as exc:
        parser.exit(2, f"error: {exc}\n")
    profile = load_default_profile()
    try:
        trace = load_traces(
            args.trace or str(trace_path("sjfbsbf-testbed-61.csv")),
            max_gpus=cluster.healthy_gpus,
            throughput=profile.isolated_throughput,
        )
    except TraceError as exc:  # e.g. the data folder absent: one line, the hint to SHAREWISE_DATA_DIR
        parser.exit(2, f"error: {exc}\n")
    jobs, quotas = trace.jobs, None
    if args.demo_quotas:
        tenants = ("team-a", "team-b")
        jobs = tuple(replace(j, tenant=tenants[i % 2]) for i, j in enumerate(trace.jobs))
        quotas = {t: TenantQuota(cluster.healthy_gpus // 2) for t in tenants}
    rows = [measure(p, jobs, cluster, profile, args.round_interval, quotas) for p in args.policies.split(",")]
    print(
        f"trace {trace.name}, cluster {args.cluster}, rounds every {args.round_interval:g} s"
        + (", two tenants of equal quotas" if quotas else "")
    )
    header = "policy      estimated jobs  first: median |err|  p90 |err|  mean err  ≤5 min  ≤15 min"
    print(header + "   every round: median |err|  p90 |err|  ≤5 min")
    for r in rows:
        f, e = r["first"], r["every"]
        if not f:
            print(f"{r['policy']:<10}  no job waited")
            continue
        print(
            f"{r['policy']:<10}  {r['estimated_jobs']:>3} of {r['jobs']:<3}     {f['median_abs_s']:>10.0f} s"
            f"  {f['p90_abs_s']:>7.0f} s  {f['mean_signed_s']:>+7.0f} s  {f['within_5min']:>5.0%}"
            f"  {f['within_15min']:>6.0%}   {e['median_abs_s']:>18.0f} s  {e['p90_abs_s']:>7.0f} s"
            f"  {e['within_5min']:>5.0%}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
