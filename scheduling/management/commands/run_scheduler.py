"""``manage.py run_scheduler [--interval S] [--once] [--policy NAME]``: the round loop without Celery."""

from __future__ import annotations

import math
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduling import services
from scheduling.core.policies import POLICY_NAMES, UnknownPolicyError
from scheduling.models import Round


def describe(record: Round | None) -> str:
    """One line about a round's outcome (what the loop prints)."""
    if record is None:
        return "round skipped: another round holds the lease"
    label = f"round {record.pk}" if record.pk is not None else "round (unchanged, not recorded)"
    return (
        f"{label} {record.policy}: {record.n_started} started, {record.n_waiting} waiting, "
        f"{record.n_preempted} preempted in {record.duration_ms:.1f} ms"
    )


class Command(BaseCommand):
    help = (
        "Run scheduling rounds in a loop (the embedded default's scheduler; production uses "
        "Celery beat). Prints one line per round; Ctrl-C stops it cleanly."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between round starts (default: SHAREWISE_ROUND_INTERVAL_S, 10)",
        )
        parser.add_argument("--once", action="store_true", help="run one round and exit")
        parser.add_argument(
            "--policy", default=None, help=f"policy ({', '.join(POLICY_NAMES)}; default SHAREWISE_POLICY)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"]
        if interval is None:
            interval = float(services.setting("SHAREWISE_ROUND_INTERVAL_S", 10.0))
        if not (math.isfinite(interval) and interval > 0):
            raise CommandError(f"--interval must be a positive number of seconds, got {interval}")
        try:
            policy = services.policy_named(options["policy"])
        except UnknownPolicyError as exc:
            raise CommandError(str(exc)) from None
        try:
            while True:
                started = time.monotonic()
                self.stdout.write(describe(self.step(policy)))
                if options["once"]:
                    return
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
        except KeyboardInterrupt:
            self.stdout.write("stopped")

    def step(self, policy: Any) -> Round | None:
        """One round (a separate method so a test can call one step)."""
        return services.run_round(policy=policy)
