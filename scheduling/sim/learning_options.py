"""The simulator's belief-vs-truth options (issue 10, docs/LEARNING.md §5): ``--prior-error``,
``--truth-error``, ``--learn``, ``--measure-noise``; the truth, prior and :class:`Belief` they
give; the learning table printed when any is set.

Without any of them nothing changes: the policy decides from the truth (the shipped table), as
before, and the report has no learning section.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from scheduling.core.profiles import TableProfile
from scheduling.core.types import Profile
from scheduling.sim.belief import REPORT_INTERVAL_S, Belief
from scheduling.sim.perturbed import PerturbedProfile


def add_learning_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the four options on ``parser`` (shared with ``manage.py simulate``)."""
    group = parser.add_argument_group(
        "belief vs truth (docs/LEARNING.md)",
        "the engine runs jobs at their true speeds, the policy decides from its belief; any of "
        "these adds a learning table (share decisions, regretted ones, ξ prediction error)",
    )
    group.add_argument(
        "--prior-error",
        type=float,
        metavar="E",
        help="the policy's prior slowdowns are the shipped table's times a factor in [1-E, 1+E] per "
        "ordered pair of job types (seeded by --seed); the truth is the shipped table",
    )
    group.add_argument(
        "--truth-error",
        type=float,
        metavar="E",
        help="the jobs' true slowdowns are the shipped table's times such a factor; the policy "
        "starts from the shipped table",
    )
    group.add_argument(
        "--learn",
        action="store_true",
        help=f"learn slowdowns and iteration times from the jobs' reports (one per co-location "
        f"lasting {REPORT_INTERVAL_S:g} s) with the service's estimator",
    )
    group.add_argument(
        "--measure-noise",
        type=float,
        default=0.0,
        metavar="S",
        help="with --learn: each measurement is multiplied by exp(N(0, S^2)) (seeded); default 0",
    )


@dataclass(frozen=True, slots=True)
class LearningSetup:
    """The options as given: errors in ``[0, 1)`` or ``None``, ``learn``, ``measure_noise`` ≥ 0."""

    prior_error: float | None
    truth_error: float | None
    learn: bool
    measure_noise: float

    def truth(self, shipped: TableProfile, seed: int) -> Profile:
        """The profile jobs truly run by."""
        return shipped if not self.truth_error else PerturbedProfile(shipped, self.truth_error, seed, "truth")

    def prior(self, shipped: TableProfile, seed: int) -> TableProfile | PerturbedProfile:
        """The profile the policy starts from."""
        return shipped if not self.prior_error else PerturbedProfile(shipped, self.prior_error, seed, "prior")

    def belief(self, shipped: TableProfile, truth: Profile, seed: int) -> Belief:
        """A fresh :class:`Belief` for one policy's run (``truth`` from :meth:`truth`)."""
        return Belief(
            truth, self.prior(shipped, seed), learn=self.learn, measure_noise=self.measure_noise, seed=seed
        )

    def as_dict(self) -> dict[str, Any]:
        """The report's ``"learning"`` section: the options and the report interval (s)."""
        return {**asdict(self), "report_interval_s": REPORT_INTERVAL_S}


def learning_setup(args: argparse.Namespace) -> LearningSetup | None:
    """The options parsed into a :class:`LearningSetup`, or ``None`` when none is set. Raises
    ``ValueError`` (one line naming the option) for an error outside ``[0, 1)``, a negative noise,
    or a noise without ``--learn``."""
    prior, truth = getattr(args, "prior_error", None), getattr(args, "truth_error", None)
    learn, noise = bool(getattr(args, "learn", False)), float(getattr(args, "measure_noise", 0.0) or 0.0)
    for flag, value in (("--prior-error", prior), ("--truth-error", truth)):
        if value is not None and not (0.0 <= value < 1.0):
            raise ValueError(f"{flag} must be in [0, 1) (a relative error), got {value}")
    if not (noise >= 0 and math.isfinite(noise)):
        raise ValueError(f"--measure-noise must be a finite number ≥ 0, got {noise}")
    if noise and not learn:
        raise ValueError("--measure-noise needs --learn (without learning nothing is measured)")
    if prior is None and truth is None and not learn:
        return None
    return LearningSetup(prior, truth, learn, noise)


def format_learning_table(report: Mapping[str, Any]) -> str:
    """Per policy: share decisions, the regretted ones, ξ MAPE overall and in the first and last
    tenth of the decided pairs, reports fed to the learner; and a line with the options."""
    lines = [
        f"{'learning':<16} {'shares':>7} {'regretted':>15} {'ξ MAPE':>7} {'1st 10th':>8} "
        f"{'last 10th':>9} {'reports ξ/alone':>16}"
    ]

    def pct(value: Any) -> str:
        return "-" if value is None else f"{value:.1%}"

    for name, summary in report["policies"].items():
        s = summary.get("learning")
        if s is None:
            continue
        share = f"{s['regretted'] / s['decisions']:.1%}" if s["decisions"] else "-"
        lines.append(
            f"{name:<16} {s['decisions']:>7,} {s['regretted']:>7,} ({share:>5}) {pct(s['xi_mape']):>7} "
            f"{pct(s['xi_mape_parts'][0]):>8} {pct(s['xi_mape_parts'][-1]):>9} "
            f"{s['slowdown_reports']:>8,}/{s['exclusive_reports']:<7,}"
        )
    setup = report.get("learning", {})
    learn = "on" if setup.get("learn") else "off"
    lines.append(
        f"prior error {setup.get('prior_error') or 0:g}, truth error {setup.get('truth_error') or 0:g}, "
        f"learning {learn}, measurement noise {setup.get('measure_noise', 0):g}, "
        f"reports after {setup.get('report_interval_s', REPORT_INTERVAL_S):g} s of a co-location"
    )
    return "\n".join(lines)
