"""Command line of the simulator: ``python -m scheduling.sim`` and ``manage.py simulate``.

Example::

    python -m scheduling.sim --trace ../shared/data/traces/sjfbsbf-testbed-61.csv \\
        --cluster 4x8 --policies fifo,sjf,srtf,tiresias,sjf-ffs,sjf-bsbf --json out.json --html out.html

Prints a progress bar per policy on stderr and the comparison table on stdout. Bad input (missing
trace, unknown format or policy, impossible cluster, unwritable output folder) → a one-line
message and exit code 2, no traceback; a policy returning an impossible decision → exit code 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from common.files import write_all_atomic
from common.shapes import (
    MAX_GPUS_PER_NODE,
    MAX_TOTAL_GPUS,
    ShapeError,
    ShapeTooLargeError,
    parse_cluster_spec,
)
from scheduling.core.charge import running_charges
from scheduling.core.fairness import GuaranteeMonitor
from scheduling.core.gpu_types import cluster_of_groups
from scheduling.core.profiles import UNKNOWN_FAMILY, TableProfile
from scheduling.core.skip import NO_SKIP, SkipRule
from scheduling.core.types import (
    FAIR_SWITCHES,
    RECLAIM_MODES,
    Cluster,
    Job,
    Policy,
    Profile,
    RoundDecisions,
    SchedulerConfig,
    Snapshot,
    TenantQuota,
    fair_switches_off,
)
from scheduling.sim import sweep
from scheduling.sim.engine import (
    DEFAULT_RESTART_COST_S,
    DEFAULT_ROUND_INTERVAL_S,
    SimConfig,
    SimResult,
    SimulationError,
    simulate,
)
from scheduling.sim.fidelity_cli import add_fidelity_arguments, resolve
from scheduling.sim.learning_options import (
    LearningSetup,
    add_learning_arguments,
    format_learning_table,
    learning_setup,
)
from scheduling.sim.loaders import TraceError, load_traces
from scheduling.sim.quotas import demand_gpu_s, proportional_quotas, quotas_from_json
from scheduling.sim.report import (
    build_report,
    format_fairness_table,
    format_table,
    html_report,
    json_report,
    never_fit_reasons,
    unfinished_warning,
)
from scheduling.sim.windows import DEFAULT_BIN_S, format_window_table, parse_windows

DEFAULT_POLICIES = "fifo,sjf,srtf,tiresias,sjf-ffs,sjf-bsbf"
#: Default grace (s) before an owner's job blocked by lent GPUs counts as a guarantee violation.
DEFAULT_GRACE_S = 120.0


class CliError(Exception):
    """A user error: the message is shown as is, exit code 2."""


def parse_cluster(text: str) -> list[tuple[int, int, str | None, int | None]]:
    """``--cluster "4x8"`` → ``[(4, 8, None, None)]``; ``"2x8:a100:81920,4x8:t4:16384"`` → node
    groups ``(nodes, GPUs per node, GPU type, memory MB)`` (:func:`common.shapes.parse_cluster_spec`):
    a simulated cluster has the bounds of every other (at most :data:`~common.shapes.MAX_GPUS_PER_NODE`
    GPUs per node and :data:`~common.shapes.MAX_TOTAL_GPUS` in total, refused before anything is
    built). Raises :class:`CliError` with one line naming ``--cluster``."""
    try:
        return parse_cluster_spec(text)
    except ShapeTooLargeError as exc:
        raise CliError(f"--cluster {text!r} too large: {exc}") from None
    except ShapeError as exc:
        raise CliError(f"bad --cluster {text!r}: {exc}") from None


def build_cluster(
    groups: list[tuple[int, int, str | None, int | None]], memory_mb: int, gpu_type: str
) -> Cluster:
    """The simulated cluster of ``--cluster`` groups: one group without a type is
    :meth:`Cluster.uniform` of ``--gpu-memory-mb`` and ``--gpu-type`` (as before GPU types);
    otherwise :func:`~scheduling.core.gpu_types.cluster_of_groups`, a group without a type taking
    those defaults."""
    if len(groups) == 1 and groups[0][2] is None:
        return Cluster.uniform(groups[0][0], groups[0][1], memory_mb, gpu_type)
    return cluster_of_groups(
        (nodes, per_node, kind or gpu_type, memory or memory_mb) for nodes, per_node, kind, memory in groups
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the simulator's options on ``parser`` (shared with ``manage.py simulate``)."""
    parser.add_argument(
        "--trace",
        nargs="+",
        required=True,
        metavar="PATH",
        help="trace file(s): Tiresias/Muri CSV, Chronus CSV, Gavel .trace file or folder; a file name "
        "alone, missing here, is the public trace of that name ($SHAREWISE_DATA_DIR/traces)",
    )
    parser.add_argument(
        "--cluster",
        required=True,
        metavar="NODESxGPUS[:TYPE:MB],...",
        help=f"e.g. 4x8, or node groups of GPU types 2x8:a100:81920,4x8:t4:16384; at most "
        f"{MAX_GPUS_PER_NODE} GPUs per node and {MAX_TOTAL_GPUS:,} GPUs in total",
    )
    parser.add_argument("--gpu-memory-mb", type=int, default=49_140, help="memory per GPU (MB)")
    parser.add_argument("--gpu-type", default="v100", help="GPU type label (the default profile is V100)")
    parser.add_argument("--policies", default=DEFAULT_POLICIES, help="comma-separated policy names")
    parser.add_argument(
        "--round-interval",
        type=float,
        metavar="S",
        help=f"seconds between rounds (default {DEFAULT_ROUND_INTERVAL_S:g}; inf, with --round-on-events: "
        "no periodic rounds, only those at arrivals and completions)",
    )
    parser.add_argument(
        "--round-on-events", action="store_true", help="also run a round at every arrival and completion"
    )
    parser.add_argument(
        "--restart-cost-s",
        type=float,
        metavar="S",
        help=f"seconds without progress after a preempted job restarts (default {DEFAULT_RESTART_COST_S:g})",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seeds the factors of --prior-error/--truth-error and the --measure-noise; recorded in "
        "the report (the simulator is deterministic)",
    )
    defaults = SchedulerConfig()
    parser.add_argument(
        "--quotas",
        metavar="FILE.json|demand",
        help="tenant quotas for every policy: a JSON file {tenant: GPUs or {guaranteed_gpus, "
        "borrow_limit}}, or 'demand' (guarantees proportional to each tenant's "
        "GPU-seconds of work, summing to the cluster's GPUs); adds a fairness table",
    )
    parser.add_argument(
        "--starvation-bound-s",
        type=float,
        default=defaults.starvation_bound_s,
        metavar="S",
        help="sjf-bsbf-fair: a job waiting this long goes first",
    )
    parser.add_argument(
        "--aging-s",
        type=float,
        default=defaults.aging_s,
        metavar="S",
        help="sjf-bsbf-fair: waiting time that halves a job's sort key",
    )
    parser.add_argument(
        "--reclaim",
        choices=RECLAIM_MODES,
        default=defaults.reclaim,
        help="how owners get lent GPUs back (sjf-bsbf-fair; preempt also for other policies' quota checks)",
    )
    parser.add_argument(
        "--borrow-bound-s",
        type=float,
        default=defaults.borrow_bound_s,
        metavar="S",
        help="reclaim bound/both: longest remaining time of a job admitted on borrowed GPUs",
    )
    parser.add_argument(
        "--off",
        default="",
        metavar="SWITCHES",
        help=f"sjf-bsbf-fair switches to turn off, comma-separated: {', '.join(FAIR_SWITCHES)}",
    )
    parser.add_argument(
        "--grace-s",
        type=float,
        default=DEFAULT_GRACE_S,
        metavar="S",
        help="with --quotas: an owner's job blocked by lent GPUs longer than this counts "
        "as a guarantee violation",
    )
    parser.add_argument(
        "--windows",
        metavar="LIST",
        help="sliding windows, e.g. 2h,24h: each tenant's GPU-hours per window and a windowed "
        "fairness figure beside the per-run one (docs/FAIRNESS.md §4)",
    )
    add_learning_arguments(parser)
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="write the report as JSON")
    parser.add_argument("--html", type=Path, metavar="OUT.html", help="write a Plotly HTML report")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--verbose", action="store_true", help="log every rejected trace row")
    add_fidelity_arguments(parser)
    sweep.add_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m scheduling.sim`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m scheduling.sim",
        description="Replay a DL job trace on a simulated GPU cluster under several scheduling policies.",
    )
    add_arguments(parser)
    return parser


def _policies(text: str) -> list:
    from scheduling.core.policies import UnknownPolicyError, get_policy

    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise CliError("--policies is empty")
    try:
        return [get_policy(n) for n in names]
    except UnknownPolicyError as exc:
        raise CliError(str(exc)) from None


def check_output(path: Path | None, flag: str) -> None:
    """Refuse an output path that could not be written, before any simulation runs.

    ``path`` must not be a folder, and its folder must exist and accept a new file (checked by
    creating and removing a temporary file there, which also works for root and read-only
    mounts). ``None`` (option not given) passes. Raises :class:`CliError`.
    """
    if path is None:
        return
    if path.is_dir():
        raise CliError(f"{flag} {path}: is a folder, expected a file name")
    folder = path.parent
    if not folder.resolve().is_dir():
        raise CliError(f"{flag} {path}: folder {folder} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise CliError(f"{flag} {path}: cannot write in folder {folder} ({exc.strerror or exc})") from None


#: Config field → the command-line option that sets it (for error messages).
OPTION_OF_FIELD = {
    "starvation_bound_s": "--starvation-bound-s",
    "borrow_bound_s": "--borrow-bound-s",
    "aging_s": "--aging-s",
    "round_interval_s": "--round-interval",
    "restart_cost_s": "--restart-cost-s",
}


def read_quotas(text: str) -> dict[str, TenantQuota] | str:
    """``--quotas``: ``"demand"`` (returned as is, resolved once the trace is loaded) or the path of
    a JSON file parsed by :func:`scheduling.sim.quotas.quotas_from_json`. Raises :class:`CliError`
    (one line) for a missing or unreadable file, malformed JSON, unknown keys or negative counts."""
    if text == "demand":
        return text
    path = Path(text)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"--quotas {text}: no such file (give a JSON file or 'demand')") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"--quotas {text}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(f"--quotas {text}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    try:
        return quotas_from_json(data)
    except ValueError as exc:
        raise CliError(f"--quotas {text}: {exc}") from None


def unknown_model_warning(jobs: Sequence[Job], profile: TableProfile) -> str | None:
    """One line naming the trace's models that ``profile`` maps to no family
    (:data:`~scheduling.core.profiles.UNKNOWN_FAMILY`), with their jobs, ``None`` when there are
    none: those jobs run at the trace's iteration time, but no slowdown is known for them, so they
    never share a GPU (the simulator's rounds do not share unknown pairs), and their memory is the
    profile's fallback guess unless the trace gives it."""
    counts: dict[str, int] = {}
    for job in jobs:
        if profile.family_of(job.model) == UNKNOWN_FAMILY:
            counts[job.model] = counts.get(job.model, 0) + 1
    if not counts:
        return None
    named = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{model} ({n})" for model, n in named[:5]) + (" …" if len(named) > 5 else "")
    jobs_n = sum(counts.values())
    return (
        f"the profile knows no model of {jobs_n} job{'s' if jobs_n != 1 else ''}: {shown}; they never "
        "share a GPU (no slowdown is known for them) and their memory is the profile's fallback guess"
    )


def quota_warnings(quotas: dict[str, TenantQuota], jobs: Sequence[Job], gpus: int) -> list[str]:
    """What looks wrong about ``quotas`` for this trace (one line each, nothing is refused): quota
    tenants with no job in the trace (a typo?), trace tenants with no quota (they only borrow), a
    single tenant (fairness metrics are trivial), guarantees summing above the cluster's ``gpus``."""
    tenants = sorted({j.tenant for j in jobs})
    out: list[str] = []
    unknown = sorted(set(quotas) - set(tenants))
    if unknown:
        out.append(
            f"--quotas names tenants with no job in the trace: {', '.join(unknown)} "
            f"(the trace's tenants: {', '.join(tenants[:10])}{' …' if len(tenants) > 10 else ''})"
        )
    missing = [t for t in tenants if t not in quotas]
    if missing and len(missing) < len(tenants):
        out.append(
            f"tenants without a quota only borrow: {', '.join(missing[:10])}"
            f"{' …' if len(missing) > 10 else ''}"
        )
    if len(tenants) == 1:
        out.append(
            f"the trace has one tenant ({tenants[0]}): fairness across tenants is trivial; "
            f"multi-tenant traces: philly-vc/, chronus-philly-mix1.csv"
        )
    total = sum(q.guaranteed_gpus for q in quotas.values())
    if total > gpus:
        out.append(f"guarantees add up to {total} GPUs, more than the cluster's {gpus}")
    return out


def demand_quotas(jobs: Sequence[Job], gpus: int) -> dict[str, TenantQuota]:
    """Guarantees proportional to each tenant's demand ``Σ G_j × P_j`` (GPU-s), summing to ``gpus``
    (:func:`scheduling.sim.quotas.proportional_quotas`); unlimited borrowing. Raises
    :class:`CliError` for a trace without work."""
    try:
        return proportional_quotas(demand_gpu_s(jobs), gpus)
    except ValueError as exc:
        raise CliError(f"--quotas demand: {exc}") from None


class Watched:
    """A policy wrapper that checks every snapshot it is shown against the quotas
    (:class:`scheduling.core.fairness.GuaranteeMonitor`); decisions are the inner policy's."""

    def __init__(self, inner: Policy, quotas: dict[str, TenantQuota], grace_s: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.skip_rule: SkipRule = getattr(inner, "skip_rule", NO_SKIP)  # the inner policy's rounds
        # a policy that reclaims takes only jobs whose tenant keeps its guarantee: only those are lent
        self.monitor = GuaranteeMonitor(
            quotas, grace_s, keep_guarantees=bool(getattr(inner, "reclaims", False))
        )

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Record the snapshot, then let the inner policy decide."""
        split = self.monitor.keep_guarantees and snapshot.tenant_quotas and snapshot.config.split_charge
        # usage as the reclaiming policy counts it (the normalised split), so both agree on what is lent
        self.monitor.observe(snapshot, running_charges(snapshot.running, profile) if split else None)
        return self.inner.decide(snapshot, profile, explain=explain)


@dataclass(frozen=True)
class PolicyRun:
    """One policy's simulation of the trace: a task of the sweep (:mod:`scheduling.sim.sweep`)."""

    policy: str
    jobs: tuple[Job, ...]
    cluster: Cluster
    config: SimConfig
    quotas: dict[str, TenantQuota]
    grace_s: float
    learning: LearningSetup | None
    seed: int
    progress: bool


def run_policy(task: PolicyRun) -> tuple[SimResult, int | None]:
    """Simulate ``task`` (in whichever process the sweep gives it): the result and, with quotas,
    the guarantee violations the monitor saw (else ``None``). Raises :class:`SimulationError`."""
    from scheduling.core.policies import get_policy
    from scheduling.profiles import load_default_profile

    profile = load_default_profile()
    policy = get_policy(task.policy)
    watched = Watched(policy, task.quotas, task.grace_s) if task.quotas else None
    learning = task.learning
    truth = profile if learning is None else learning.truth(profile, task.seed)
    belief = None if learning is None else learning.belief(profile, truth, task.seed)
    result = simulate(
        task.jobs, task.cluster, watched or policy, truth, task.config, progress=task.progress, belief=belief
    )
    return result, None if watched is None else len(watched.monitor.violated)


def run(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    """Run the simulations described by parsed ``args``; returns the exit code (0).

    Raises :class:`CliError` for bad input (before anything is written) and
    :class:`SimulationError` when a policy misbehaves.
    """
    from scheduling.profiles import load_default_profile

    stdout = stdout or sys.stdout
    groups = parse_cluster(args.cluster)
    if args.gpu_memory_mb < 1:
        raise CliError(f"--gpu-memory-mb must be positive, got {args.gpu_memory_mb}")
    if not (args.grace_s >= 0 and math.isfinite(args.grace_s)):
        raise CliError(f"--grace-s must be a finite number ≥ 0, got {args.grace_s}")
    try:
        chosen = resolve(args)  # the options, --preset and our defaults
        scheduler = SchedulerConfig(
            starvation_bound_s=args.starvation_bound_s,
            aging_s=args.aging_s,
            reclaim=args.reclaim,
            borrow_bound_s=args.borrow_bound_s,
            **fair_switches_off(args.off),
            placement=chosen.placement,
            tiresias=chosen.tiresias,
        )
        if math.isinf(chosen.round_interval_s) and not chosen.round_on_events:
            raise CliError(
                "--round-interval inf needs --round-on-events: with no periodic round, the only "
                "rounds are those at arrivals and completions"
            )
        config = SimConfig(
            round_interval_s=chosen.round_interval_s,
            round_on_events=chosen.round_on_events,
            restart_cost_s=chosen.restart_cost_s,
            seed=args.seed,
            scheduler=scheduler,
            fidelity=chosen.fidelity,
            usage_bin_s=DEFAULT_BIN_S if args.windows else None,
        )
        windows_s = parse_windows(args.windows) if args.windows else ()
    except ValueError as exc:
        message = str(exc)
        for field, option in OPTION_OF_FIELD.items():  # name the option the user typed
            message = message.replace(field, option)
        raise CliError(message) from None
    try:
        learning = learning_setup(args)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    requested = read_quotas(args.quotas) if args.quotas is not None else None
    check_output(args.json, "--json")
    check_output(args.html, "--html")
    policies = _policies(args.policies)
    cluster = build_cluster(groups, args.gpu_memory_mb, args.gpu_type)
    profile = load_default_profile()
    try:
        trace = load_traces(args.trace, max_gpus=cluster.healthy_gpus, throughput=profile.isolated_throughput)
    except TraceError as exc:
        raise CliError(str(exc)) from None
    unknown = unknown_model_warning(trace.jobs, profile)
    if unknown is not None:
        print(f"warning: {unknown}", file=sys.stderr)
    quotas: dict[str, TenantQuota] = {}  # none: no quota gate, no fairness table
    if isinstance(requested, str):  # "demand", resolved now that the trace is loaded
        quotas = demand_quotas(trace.jobs, cluster.healthy_gpus)
    elif requested is not None:
        quotas = requested
    if quotas:
        config = replace(config, tenant_quotas=quotas)
        for warning in quota_warnings(quotas, trace.jobs, cluster.healthy_gpus):
            print(f"warning: {warning}", file=sys.stderr)
    workers, dask = getattr(args, "workers", 1), getattr(args, "dask", None)
    # A progress bar per simulation only when they run one after the other here; else one for all.
    inner = not args.no_progress and (workers == 1 or len(policies) == 1) and not dask
    tasks = [
        PolicyRun(
            p.name, tuple(trace.jobs), cluster, config, quotas, args.grace_s, learning, args.seed, inner
        )
        for p in policies
    ]
    try:
        done = sweep.run_tasks(
            run_policy, tasks, workers=workers, dask=dask, desc="policies", progress=not args.no_progress
        )
    except sweep.SweepError as exc:
        raise CliError(str(exc)) from None
    results = {p.name: result for p, (result, _) in zip(policies, done, strict=True)}
    violations = {p.name: n for p, (_, n) in zip(policies, done, strict=True) if n is not None}
    report = build_report(
        trace,
        cluster,
        config,
        results,
        never_fit_reasons(trace.jobs, cluster, profile),
        violations,
        windows_s,
    )
    if learning is not None:
        report["learning"] = learning.as_dict()
    stdout.write(format_table(report) + "\n")
    if quotas:
        stdout.write("\n" + format_fairness_table(report) + "\n")
    if windows_s:
        stdout.write("\n" + format_window_table(report) + "\n")
    if learning is not None:
        stdout.write("\n" + format_learning_table(report) + "\n")
    for name, summary in report["policies"].items():
        unfinished = unfinished_warning(name, summary)
        if unfinished is not None:
            print(unfinished, file=sys.stderr)
    outputs: dict[Path, str] = {}
    if args.json is not None:
        outputs[args.json] = json_report(report)
    if args.html is not None:
        outputs[args.html] = html_report(report, results)
    try:
        write_all_atomic(outputs)  # the JSON and the HTML report, both or neither
    except OSError as exc:
        raise CliError(
            f"cannot write {exc.filename or 'the report'}: {exc.strerror or exc}; no report file was written"
        ) from None
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse ``argv``, run, turn errors into messages and exit codes."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return run(args)
    except CliError as exc:
        # One line, no usage block: the options parsed, their values are what is wrong.
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    except SimulationError as exc:
        print(f"{parser.prog}: simulation failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    return 0
