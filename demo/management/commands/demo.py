"""``manage.py demo``: replay a trace through the REST API on an emulated cluster, time-compressed,
with the dashboard live, then compare with the simulator (see :mod:`demo`)."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.models import MAX_GPU_MEMORY_MB, MAX_SHAPE_NODES
from common.shapes import ShapeError, parse_shape
from demo.options import (
    DEFAULT_ROUND_INTERVAL_S,
    DEFAULT_SPEEDUP,
    STOPPED_BY_CTRL_C,
    DemoConfig,
    DemoError,
)
from demo.run import run_demo


class Command(BaseCommand):
    help = (
        "Live demo on the embedded defaults: a 4x8-GPU cluster of 49,140 MB, the trace's tenants (two "
        "when it has fewer), a trace replayed through the REST API (default: the shared data's "
        "sjfbsbf-testbed-61.csv, else a built-in synthetic workload), rounds and emulated agents "
        "in-process, the dashboard served; at the end the live metrics beside the simulator's for "
        "the same input."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--trace", type=Path, default=None, help="trace file (any format the simulator reads)"
        )
        parser.add_argument(
            "--synthetic-jobs",
            type=int,
            default=40,
            help="jobs of the synthetic workload used when there is no trace (40)",
        )
        parser.add_argument(
            "--speedup",
            type=float,
            default=DEFAULT_SPEEDUP,
            help=f"trace seconds per wall second ({DEFAULT_SPEEDUP:g})",
        )
        parser.add_argument(
            "--round-interval",
            type=float,
            default=DEFAULT_ROUND_INTERVAL_S,
            help="seconds of trace time between rounds (60, the simulator's default)",
        )
        parser.add_argument("--policy", default="sjf-bsbf", help="scheduling policy (sjf-bsbf)")
        parser.add_argument("--cluster", default="4x8", help="NODESxGPUS (4x8, the paper's testbed)")
        parser.add_argument("--gpu-memory-mb", type=int, default=49_140, help="memory per GPU (MB)")
        parser.add_argument("--host", default="127.0.0.1", help="address of the web service")
        parser.add_argument("--port", type=int, default=8000, help="port of the web service (0: any free)")
        parser.add_argument(
            "--exit-when-done",
            action="store_true",
            help="exit after the comparison instead of serving the dashboard until Ctrl-C",
        )
        parser.add_argument(
            "--timeout", type=float, default=None, help="give up after this many wall seconds"
        )
        parser.add_argument("--flush", action="store_true", help="empty the database first (all its data!)")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")
        parser.add_argument(
            "--api",
            default=None,
            metavar="URL",
            help="multi-process mode: replay to the web service at URL; rounds come from "
            "Celery beat and agents from `python -m agent --fleet` (see Procfile)",
        )
        parser.add_argument(
            "--truth-error",
            type=float,
            default=None,
            metavar="E",
            help="the emulated jobs' true slowdowns are the shipped profile's times a factor in "
            "[1-E, 1+E] per ordered pair of job types (seeded by --seed; the simulator's "
            "--truth-error): the service starts from a wrong profile and learns",
        )
        parser.add_argument("--seed", type=int, default=0, help="seed of --truth-error (0)")
        parser.add_argument(
            "--token-file",
            type=Path,
            default=None,
            help="write the node tokens here (JSON, the agent's --token-file)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:  # the live cluster's limits, checked before anything is written
            nodes, per_node = parse_shape(options["cluster"], max_nodes=MAX_SHAPE_NODES)
        except ShapeError as exc:
            raise CommandError(f"bad --cluster {options['cluster']!r}: {exc}") from None
        if not 1 <= options["gpu_memory_mb"] <= MAX_GPU_MEMORY_MB:
            raise CommandError(
                f"--gpu-memory-mb must be 1 to {MAX_GPU_MEMORY_MB} MB, got {options['gpu_memory_mb']}"
            )
        if options["trace"] is not None and not options["trace"].exists():
            raise CommandError(f"trace not found: {options['trace']}")
        if not 0 <= options["port"] <= 65535:
            raise CommandError(f"--port must be 0 to 65535, got {options['port']}")
        timeout = options["timeout"]
        if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
            raise CommandError(f"--timeout must be a positive number of seconds, got {timeout:g}")
        config = DemoConfig(
            trace=options["trace"],
            synthetic_jobs=options["synthetic_jobs"],
            nodes=nodes,
            gpus_per_node=per_node,
            gpu_memory_mb=options["gpu_memory_mb"],
            policy=options["policy"],
            speedup=options["speedup"],
            round_interval_s=options["round_interval"],
            host=options["host"],
            port=options["port"],
            exit_when_done=options["exit_when_done"],
            progress=not options["no_progress"],
            timeout_s=options["timeout"],
            api=options["api"],
            token_file=options["token_file"],
            truth_error=options["truth_error"],
            seed=options["seed"],
        )
        if config.api is not None and not config.api.startswith(("http://", "https://")):
            raise CommandError(f"--api must be an http(s) URL, got {config.api!r}")
        call_command("migrate", interactive=False, verbosity=0)
        if options["flush"]:
            call_command("flush", interactive=False, verbosity=0)
        logging.getLogger("agent").setLevel(logging.ERROR)  # refused stale reports are expected
        try:
            code = run_demo(config, self.say)
        except DemoError as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:  # Ctrl-C while setting up, or a second one while shutting down
            self.stdout.write(STOPPED_BY_CTRL_C)
            raise SystemExit(130) from None
        if code == 130:  # Ctrl-C: run_demo said "stopped by Ctrl-C"; the shell's status, no more words
            raise SystemExit(130)
        if code:
            raise CommandError("not every job finished (see above)", returncode=code)

    def say(self, line: str) -> None:
        """Print one line of the demo and flush it: stdout into a pipe or a file is block-buffered,
        and the dashboard's URL must show when the dashboard is up, not when the demo ends."""
        self.stdout.write(line)
        self.stdout.flush()
