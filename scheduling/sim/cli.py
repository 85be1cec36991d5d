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
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from scheduling.core.types import Cluster
from scheduling.sim.engine import (
    DEFAULT_RESTART_COST_S,
    DEFAULT_ROUND_INTERVAL_S,
    SimConfig,
    SimulationError,
    simulate,
)
from scheduling.sim.loaders import TraceError, load_traces
from scheduling.sim.report import build_report, format_table, write_html, write_json

DEFAULT_POLICIES = "fifo,sjf,srtf,tiresias,sjf-ffs,sjf-bsbf"
_CLUSTER_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


class CliError(Exception):
    """A user error: the message is shown as is, exit code 2."""


def parse_cluster(text: str) -> tuple[int, int]:
    """``"4x8"`` → ``(4, 8)`` (nodes, GPUs per node); raises :class:`CliError` otherwise."""
    match = _CLUSTER_RE.match(text)
    if match is None:
        raise CliError(f"bad --cluster {text!r}: expected NODESxGPUS, e.g. 4x8")
    nodes, gpus = int(match[1]), int(match[2])
    if nodes < 1 or gpus < 1:
        raise CliError(f"impossible cluster {text!r}: it needs at least one node and one GPU per node")
    return nodes, gpus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the simulator's options on ``parser`` (shared with ``manage.py simulate``)."""
    parser.add_argument("--trace", nargs="+", required=True, metavar="PATH",
                        help="trace file(s): Tiresias/Muri CSV, Chronus CSV, Gavel .trace file or folder")
    parser.add_argument("--cluster", required=True, metavar="NODESxGPUS", help="e.g. 4x8")
    parser.add_argument("--gpu-memory-mb", type=int, default=49_140, help="memory per GPU (MB)")
    parser.add_argument("--gpu-type", default="v100", help="GPU type label (the default profile is V100)")
    parser.add_argument("--policies", default=DEFAULT_POLICIES, help="comma-separated policy names")
    parser.add_argument("--round-interval", type=float, default=DEFAULT_ROUND_INTERVAL_S, metavar="S",
                        help="seconds between scheduling rounds")
    parser.add_argument("--round-on-events", action="store_true",
                        help="also run a round at every arrival and completion")
    parser.add_argument("--restart-cost-s", type=float, default=DEFAULT_RESTART_COST_S, metavar="S",
                        help="seconds without progress after a preempted job restarts")
    parser.add_argument("--seed", type=int, default=0,
                        help="recorded in the report (the simulator is deterministic)")
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="write the report as JSON")
    parser.add_argument("--html", type=Path, metavar="OUT.html", help="write a Plotly HTML report")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--verbose", action="store_true", help="log every rejected trace row")


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


def _check_output(path: Path | None, flag: str) -> None:
    if path is not None and not path.parent.resolve().is_dir():
        raise CliError(f"{flag} {path}: folder {path.parent} does not exist")


def run(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    """Run the simulations described by parsed ``args``; returns the exit code (0).

    Raises :class:`CliError` for bad input (before anything is written) and
    :class:`SimulationError` when a policy misbehaves.
    """
    from scheduling.profiles import load_default_profile

    stdout = stdout or sys.stdout
    nodes, per_node = parse_cluster(args.cluster)
    if args.gpu_memory_mb < 1:
        raise CliError(f"--gpu-memory-mb must be positive, got {args.gpu_memory_mb}")
    try:
        config = SimConfig(round_interval_s=args.round_interval, round_on_events=args.round_on_events,
                           restart_cost_s=args.restart_cost_s, seed=args.seed)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    _check_output(args.json, "--json")
    _check_output(args.html, "--html")
    policies = _policies(args.policies)
    cluster = Cluster.uniform(nodes, per_node, args.gpu_memory_mb, args.gpu_type)
    profile = load_default_profile()
    try:
        trace = load_traces(args.trace, max_gpus=cluster.healthy_gpus, throughput=profile.isolated_throughput)
    except TraceError as exc:
        raise CliError(str(exc)) from None
    results = {}
    for policy in policies:
        results[policy.name] = simulate(trace.jobs, cluster, policy, profile, config,
                                        progress=not args.no_progress)
    report = build_report(trace, cluster, config, results)
    stdout.write(format_table(report) + "\n")
    if args.json is not None:
        write_json(args.json, report)
    if args.html is not None:
        write_html(args.html, report, results)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse ``argv``, run, turn errors into messages and exit codes."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        return run(args)
    except CliError as exc:
        parser.error(str(exc))  # prints usage and the message, exits with code 2
    except SimulationError as exc:
        print(f"{parser.prog}: simulation failed: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{parser.prog}: interrupted", file=sys.stderr)
        return 130
    return 0
