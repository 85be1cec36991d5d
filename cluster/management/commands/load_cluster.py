"""``manage.py load_cluster 4x8``: register NODES identical nodes of GPUS GPUs each, for quick set-ups."""

from __future__ import annotations

import re
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from cluster.agents import write_token_file
from cluster.models import Node, validate_shape

SHAPE = re.compile(r"^([1-9][0-9]{0,3})x([1-9][0-9]?)$")


def parse_shape(text: str) -> tuple[int, int]:
    """``"4x8"`` → ``(4, 8)`` (nodes, GPUs per node). Raises ``ValueError`` with a readable message."""
    match = SHAPE.match(text.strip().lower())
    if not match:
        raise ValueError(
            f"cluster shape must look like NODESxGPUS, e.g. 4x8 (1-9999 nodes, 1-64 GPUs), got {text!r}"
        )
    nodes, gpus = int(match[1]), int(match[2])
    validate_shape(nodes, gpus)
    return nodes, gpus


class Command(BaseCommand):
    help = (
        "Register NODESxGPUS identical nodes (named PREFIX-00, PREFIX-01, ...); agent tokens are not "
        "shown (--token-file writes them to a file)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("shape", help="NODESxGPUS, e.g. 4x8")
        parser.add_argument("--gpu-memory-mb", type=int, default=49_140, help="memory per GPU, MB")
        parser.add_argument("--gpu-type", default="v100", help="GPU type")
        parser.add_argument("--prefix", default="node", help="node name prefix (default node)")
        parser.add_argument(
            "--token-file",
            default=None,
            metavar="PATH",
            help="write the agent tokens here as JSON {node: token} (agent --token-file)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            nodes, gpus = parse_shape(options["shape"])
            # Same naming as scheduling.core.types.Cluster.uniform, so simulated and live clusters match.
            width = max(2, len(str(nodes - 1)))
            names = [f"{options['prefix']}-{n:0{width}d}" for n in range(nodes)]
            clash = list(Node.objects.filter(name__in=names).values_list("name", flat=True)[:5])
            if clash:
                raise ValueError(f"nodes already exist: {', '.join(clash)}; choose another --prefix")
            tokens: dict[str, str] = {}
            with transaction.atomic():
                for name in names:
                    tokens[name] = Node.register(name, gpus, options["gpu_memory_mb"], options["gpu_type"])[1]
                if options["token_file"]:
                    write_token_file(options["token_file"], tokens)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write --token-file {options['token_file']}: {exc.strerror}") from None
        self.stdout.write(
            f"Registered {nodes} nodes x {gpus} GPUs = {nodes * gpus} {options['gpu_type']} GPUs."
        )
