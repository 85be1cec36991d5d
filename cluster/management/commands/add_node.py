"""``manage.py add_node NAME --gpus 8 --gpu-memory-mb 49140 --gpu-type v100``: register a node."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.models import Node


class Command(BaseCommand):
    help = "Register a GPU node with identical GPUs and print its agent token (shown once)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="node name: 1-64 lowercase letters, digits and inner hyphens")
        parser.add_argument("--gpus", type=int, default=8, help="GPUs on the node (1-64, default 8)")
        parser.add_argument("--gpu-memory-mb", type=int, default=49_140, help="memory per GPU, MB")
        parser.add_argument("--gpu-type", default="v100", help="GPU type, e.g. v100, a100")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            node, token = Node.register(
                options["name"], options["gpus"], options["gpu_memory_mb"], options["gpu_type"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(
            f"Registered node {node.name}: {options['gpus']} x {options['gpu_type']} "
            f"({options['gpu_memory_mb']} MB). Agent token:"
        )
        self.stdout.write(token)
