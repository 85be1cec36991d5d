"""``manage.py simulate``: the trace-driven simulator, same options as ``python -m scheduling.sim``."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduling.sim import cli
from scheduling.sim.engine import SimulationError


class Command(BaseCommand):
    """Thin wrapper: :func:`scheduling.sim.cli.add_arguments` and :func:`scheduling.sim.cli.run`.

    Bad input → ``CommandError`` with exit code 2 (the message only, no traceback); a policy
    returning an impossible decision → exit code 1.
    """

    help = "Replay a DL job trace on a simulated GPU cluster under several scheduling policies."

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            cli.run(argparse.Namespace(**options), stdout=self.stdout)
        except cli.CliError as exc:
            raise CommandError(str(exc), returncode=2) from None
        except SimulationError as exc:
            raise CommandError(f"simulation failed: {exc}", returncode=1) from None
