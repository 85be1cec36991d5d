"""``manage.py run_scheduler [--interval S] [--once] [--policy NAME]``: the scheduler loop without
Celery; each step is one :func:`scheduling.service.tick` (heartbeat check, then a round)."""

from __future__ import annotations

import logging
import math
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from config.startup import first_line, has_unapplied_migrations, is_missing_table
from scheduling import service
from scheduling.core.policies import POLICY_NAMES, UnknownPolicyError
from scheduling.models import Round
from scheduling.service.heartbeats import NODE_MARKED
from scheduling.service.lease import lease_holder


def describe(record: Round | None, holder: tuple[str, datetime] | None = None) -> str:
    """One line about a round's outcome (what the loop prints); for a round skipped, the lease's
    ``holder`` (:func:`~scheduling.service.lease.lease_holder`) when known: an operator who killed
    a scheduler sees whose lease blocks the rounds and when it frees at the latest."""
    if record is None:
        if holder is None:
            return "round skipped: another round holds the lease"
        who, until = holder
        return (
            f"round skipped: another round holds the lease ({who}; free by "
            f"{until.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC if its process died)"
        )
    label = f"round {record.pk}" if record.pk is not None else "round (unchanged, not recorded)"
    return (
        f"{label} {record.policy}: {record.n_started} started, {record.n_waiting} waiting, "
        f"{record.n_preempted} preempted in {record.duration_ms:.1f} ms"
    )


def describe_unhealthy(node: str, requeued: list[int]) -> str:
    """One line about a node the heartbeat check marked unhealthy."""
    jobs = ", ".join(map(str, requeued)) or "none"
    return f"node {node} marked unhealthy (heartbeat timeout); requeued jobs: {jobs}"


def not_a_marked_node(record: logging.LogRecord) -> bool:
    """A log filter: the heartbeat check's record of a node it marked unhealthy is left out, since
    the loop prints its own line about that node (one line per node, as the README says)."""
    return not hasattr(record, NODE_MARKED)


class Command(BaseCommand):
    help = (
        "Run the scheduler in a loop (the embedded default's scheduler; production uses Celery "
        "beat): each step checks the heartbeats, then runs a round. Prints one line per round "
        "(and per node marked unhealthy); a step that fails on the database is reported and the "
        "next one tries again; Ctrl-C stops it cleanly."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between round starts (default: SHAREWISE_ROUND_INTERVAL_S)",
        )
        parser.add_argument("--once", action="store_true", help="run one step and exit")
        parser.add_argument(
            "--policy", default=None, help=f"policy ({', '.join(POLICY_NAMES)}; default SHAREWISE_POLICY)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"]
        if interval is None:
            interval = float(settings.SHAREWISE_ROUND_INTERVAL_S)
        if not (math.isfinite(interval) and interval > 0):
            raise CommandError(f"--interval must be a positive number of seconds, got {interval}")
        try:
            policy = service.policy_named(options["policy"])
        except UnknownPolicyError as exc:
            raise CommandError(str(exc)) from None
        heartbeat_log = logging.getLogger("scheduling.service.heartbeats")
        heartbeat_log.addFilter(not_a_marked_node)
        try:
            while True:
                started = time.monotonic()
                try:
                    done = self.step(policy)
                except DatabaseError as exc:
                    # the driver's first line only: psycopg's refusal goes on over a second line
                    # ("Is the server running ...?"), a query's error over the query's text
                    if options["once"]:
                        if is_missing_table(exc) and has_unapplied_migrations():
                            raise  # manage.py says to migrate (config.startup.database_line)
                        raise CommandError(f"round failed: {first_line(exc)}") from None
                    # e.g. SQLite busy past its timeout, or the database being migrated at the
                    # same time (docker-compose starts both): the next step tries again
                    self.stderr.write(f"round failed: {first_line(exc)}; next step in {interval:g} s")
                    time.sleep(interval)
                    continue
                for node, requeued in done.unhealthy.items():
                    self.stdout.write(describe_unhealthy(node, requeued))
                self.stdout.write(describe(done.round, lease_holder() if done.round is None else None))
                # stdout redirected to a file is block-buffered: an operator tailing the log (or
                # a supervisor collecting it) must see each round when it happens, not 4 KB later
                self.stdout.flush()
                if options["once"]:
                    return
                time.sleep(max(0.0, interval - (time.monotonic() - started)))
        except KeyboardInterrupt:
            self.stdout.write("stopped")
        finally:
            heartbeat_log.removeFilter(not_a_marked_node)

    def step(self, policy: Any) -> service.Tick:
        """One tick (a separate method so a test can call one step)."""
        return service.tick(policy=policy)
