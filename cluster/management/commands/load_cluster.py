"""``manage.py load_cluster 4x8``: register NODES identical nodes of GPUS GPUs each, for quick set-ups."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from cluster.models import MAX_SHAPE_NODES, Node
from cluster.tokens import write_token_file
from common.shapes import node_names, parse_shape


class Command(BaseCommand):
    help = (
        "Register NODESxGPUS identical nodes (named PREFIX-00, PREFIX-01, ...); agent tokens are not "
        "shown (--token-file writes them to a file)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("shape", help=f"NODESxGPUS, e.g. 4x8 (at most {MAX_SHAPE_NODES} nodes)")
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
            nodes, gpus = parse_shape(options["shape"], max_nodes=MAX_SHAPE_NODES)
            # The names of the simulator's clusters, so simulated and live clusters match.
            names = node_names(nodes, options["prefix"])
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
