"""Command-line options of the baselines' settings and the fidelity knobs, and ``--preset``.

:func:`add_fidelity_arguments` declares them (``python -m scheduling.sim`` and ``manage.py
simulate``); :func:`resolve` turns the parsed options into the values of
:class:`~scheduling.sim.engine.SimConfig` and :class:`~scheduling.core.types.SchedulerConfig`:
an option given on the command line wins, then the preset's value (:mod:`scheduling.sim.presets`),
then our default. Without ``--preset`` and these options nothing changes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from scheduling.core.metrics import PERCENTILE_METHODS
from scheduling.core.types import PLACEMENTS, TIRESIAS_DEMOTED, TIRESIAS_SERVICE_UNITS, TiresiasConfig
from scheduling.sim.engine import DEFAULT_RESTART_COST_S, DEFAULT_ROUND_INTERVAL_S
from scheduling.sim.fidelity import CHARGE_MODES, OVERHEAD_TABLES, REPLAN_MODES, Fidelity, overhead_table
from scheduling.sim.presets import PRESET_NAMES, PRESETS


def _on_off(text: str) -> bool:
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"expected on or off, got {text!r}")
    return text == "on"


def _thresholds(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(t) for t in text.split(",") if t.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


def add_fidelity_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``--preset`` and the options it sets (all default to ``None``: not given)."""
    group = parser.add_argument_group("baselines and fidelity (docs/FIDELITY.md)")
    group.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        help="a peer's setting in one flag: "
        + "; ".join(f"{p.name}: {p.description}" for p in PRESETS.values()),
    )
    group.add_argument(
        "--placement",
        choices=PLACEMENTS,
        help="exclusive baselines: spread (ours) or consolidated (the peers' yarn: a gang of at most "
        "a node on one node, larger ones on whole nodes)",
    )
    group.add_argument(
        "--tiresias-thresholds",
        type=_thresholds,
        metavar="T1,T2,...",
        help="Tiresias' queue thresholds (n thresholds, n + 1 queues; default 3200)",
    )
    group.add_argument(
        "--tiresias-service",
        choices=TIRESIAS_SERVICE_UNITS,
        help="what the thresholds measure: gpu_s (attained GPU-seconds, default) or wall_s (executed s)",
    )
    group.add_argument("--tiresias-guard", type=_on_off, metavar="on|off", help="Tiresias' starvation guard")
    group.add_argument(
        "--tiresias-starvation-factor",
        type=float,
        metavar="F",
        help="promote after waiting F x executed time",
    )
    group.add_argument(
        "--tiresias-demoted",
        choices=TIRESIAS_DEMOTED,
        help="where a demoted job goes: ahead (ours) or back of the lower queue (the peers' queue lists)",
    )
    group.add_argument(
        "--first-start-overhead",
        metavar="TABLE|S",
        help=f"no progress after a job's first start: seconds or a table ({', '.join(OVERHEAD_TABLES)})",
    )
    group.add_argument(
        "--relaunch-overhead",
        metavar="TABLE|S",
        help="no progress after each relaunch (a restart, on top of the restart cost, and at a re-plan)",
    )
    group.add_argument(
        "--replan",
        choices=REPLAN_MODES,
        help="rounds that relaunch every running job: never (ours), every-round, on-change",
    )
    group.add_argument(
        "--overhead-charge",
        choices=CHARGE_MODES,
        help="launch: no progress for the overhead after each launch (default); interrupted: a "
        "re-plan takes it off the interval it ends, a completed interval is free (Muri's simulator)",
    )
    group.add_argument(
        "--rounds-at-horizon",
        type=_on_off,
        metavar="on|off",
        help="also a round whenever the policy's ranking may change with time alone (Tiresias' queue jumps)",
    )
    group.add_argument(
        "--iteration-time-factor", type=float, metavar="F", help="every job's iteration time x F (default 1)"
    )
    group.add_argument(
        "--percentile",
        choices=PERCENTILE_METHODS,
        help="percentiles: linear interpolation (ours) or index into the sorted JCTs (the peers')",
    )


@dataclass(frozen=True, slots=True)
class Resolved:
    """The settings of a run after options, preset and defaults (see the module docstring)."""

    round_interval_s: float
    round_on_events: bool
    restart_cost_s: float
    placement: str
    tiresias: TiresiasConfig
    fidelity: Fidelity


def resolve(args: argparse.Namespace) -> Resolved:
    """Options over the preset over our defaults, field by field. ``args.round_interval``,
    ``args.restart_cost_s`` are ``None`` and ``args.round_on_events`` ``False`` when not given
    (then the preset's, or ours: 60 s, 30 s, no event rounds).
    Raises ``ValueError`` (naming the option) for a bad overhead table, threshold list or value."""
    preset = PRESETS[args.preset] if getattr(args, "preset", None) else None

    def pick(value, preset_value, default):
        return value if value is not None else (preset_value if preset is not None else default)

    base_t = preset.tiresias if preset is not None else TiresiasConfig()
    base_f = preset.fidelity if preset is not None else Fidelity()
    try:
        tiresias = TiresiasConfig(
            thresholds=pick(args.tiresias_thresholds, base_t.thresholds, base_t.thresholds),
            service=pick(args.tiresias_service, base_t.service, base_t.service),
            starvation_guard=pick(args.tiresias_guard, base_t.starvation_guard, base_t.starvation_guard),
            starvation_factor=pick(
                args.tiresias_starvation_factor, base_t.starvation_factor, base_t.starvation_factor
            ),
            demoted=pick(args.tiresias_demoted, base_t.demoted, base_t.demoted),
        )
    except ValueError as exc:
        raise ValueError(f"--tiresias-*: {exc}") from None
    try:
        first = overhead_table(args.first_start_overhead) if args.first_start_overhead else base_f.first_start
        relaunch = overhead_table(args.relaunch_overhead) if args.relaunch_overhead else base_f.relaunch
    except ValueError as exc:
        raise ValueError(f"--first-start-overhead/--relaunch-overhead: {exc}") from None
    fidelity = Fidelity(
        iteration_time_factor=pick(args.iteration_time_factor, base_f.iteration_time_factor, 1.0),
        first_start=first,
        relaunch=relaunch,
        replan=pick(args.replan, base_f.replan, "never"),
        rounds_at_horizon=pick(args.rounds_at_horizon, base_f.rounds_at_horizon, False),
        percentile=pick(args.percentile, base_f.percentile, "linear"),
        charge=pick(args.overhead_charge, base_f.charge, "launch"),
    )
    return Resolved(
        round_interval_s=pick(
            args.round_interval, preset.round_interval_s if preset else None, DEFAULT_ROUND_INTERVAL_S
        ),
        round_on_events=bool(args.round_on_events) or (preset is not None and preset.round_on_events),
        restart_cost_s=pick(
            args.restart_cost_s, preset.restart_cost_s if preset else None, DEFAULT_RESTART_COST_S
        ),
        placement=pick(args.placement, preset.placement if preset else None, "spread"),
        tiresias=tiresias,
        fidelity=fidelity,
    )
