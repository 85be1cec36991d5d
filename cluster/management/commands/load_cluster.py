"""``manage.py load_cluster 4x8 [--token-file F] [--new-tokens]``: register NODES identical nodes of
GPUS GPUs each (``node-00`` …), for quick set-ups; safe to run again.

Running it again registers only the nodes that are missing and says which exist already (a node
that exists with another number of GPUs is an error). Agent tokens are never printed: with
``--token-file`` they are written there (JSON ``{node: token}``, mode 0600, what ``python -m agent
--token-file`` reads), merged with the tokens the file already holds that still work. Only a
token's hash is stored, so an existing node whose token is not in the file cannot get it back:
``--new-tokens`` issues new ones for those nodes (their running agents must restart with them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from cluster.models import MAX_SHAPE_NODES, Node
from cluster.tokens import write_token_file
from common.shapes import node_names, parse_shape


def read_token_file(path: str) -> dict[str, str]:
    """The tokens already in ``path`` (``{}`` when it does not exist or holds no JSON object)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def shown(names: list[str]) -> str:
    """``node-00, node-01`` (the first five, then ``…``)."""
    return ", ".join(names[:5]) + (f", … ({len(names)} in all)" if len(names) > 5 else "")


class Command(BaseCommand):
    help = (
        "Register NODESxGPUS identical nodes (named PREFIX-00, PREFIX-01, ...), those not registered yet; "
        "agent tokens are not shown (--token-file writes them to a file)."
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
            help="write the agent tokens here as JSON {node: token} (agent --token-file), merged with "
            "the working tokens it already holds",
        )
        parser.add_argument(
            "--new-tokens",
            action="store_true",
            help="issue new tokens for existing nodes whose token is not in --token-file "
            "(their agents must restart with the new ones)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = options["token_file"]
        if options["new_tokens"] and not path:
            raise CommandError("--new-tokens needs --token-file (where the new tokens go)")
        try:
            nodes, gpus = parse_shape(options["shape"], max_nodes=MAX_SHAPE_NODES)
            # The names of the simulator's clusters, so simulated and live clusters match.
            names = node_names(nodes, options["prefix"])
            existing = {n.name: n for n in Node.objects.filter(name__in=names).prefetch_related("gpus")}
            wrong = [
                f"{n} ({len(existing[n].gpus.all())})"
                for n in names
                if n in existing and len(existing[n].gpus.all()) != gpus
            ]
            if wrong:
                raise ValueError(
                    f"nodes already exist with another number of GPUs than {gpus}: {shown(wrong)}; "
                    "choose another --prefix"
                )
            stored = read_token_file(path) if path else {}
            kept = {n: t for n, t in stored.items() if n in existing and existing[n].check_agent_token(t)}
            tokenless = [n for n in names if n in existing and n not in kept]
            tokens: dict[str, str] = {}
            with transaction.atomic():
                for name in names:
                    if name not in existing:
                        tokens[name] = Node.register(
                            name, gpus, options["gpu_memory_mb"], options["gpu_type"]
                        )[1]
                if options["new_tokens"]:
                    for name in tokenless:
                        node = existing[name]
                        tokens[name] = node.issue_agent_token()
                        node.save(update_fields=["agent_token_hash"])
                if path:
                    write_token_file(path, {**stored, **kept, **tokens})
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(f"cannot write --token-file {path}: {exc.strerror}") from None
        added = [n for n in names if n not in existing]
        there = [n for n in names if n in existing]
        if added:
            self.stdout.write(
                f"Registered {len(added)} node{'' if len(added) == 1 else 's'} x {gpus} GPUs = "
                f"{len(added) * gpus} {options['gpu_type']} GPUs ({shown(added)})."
            )
            if not path:
                self.stderr.write(
                    f"The agent tokens of {shown(added)} were not written anywhere (no --token-file) and "
                    "cannot be shown again (only their hash is kept): run again with --token-file FILE "
                    "--new-tokens to issue new ones."
                )
        if there:
            self.stdout.write(f"Already registered, left as they are: {shown(there)}.")
            asked = (options["gpu_type"], options["gpu_memory_mb"])
            other = [
                n for n in there if any((g.gpu_type, g.memory_mb) != asked for g in existing[n].gpus.all())
            ]
            if other:
                self.stderr.write(
                    f"{shown(other)} already have GPUs of another type or memory than {asked[0]} with "
                    f"{asked[1]} MB: left as they are (remove them first to register them again)."
                )
        if path:
            self.stdout.write(f"Agent tokens of {len(kept) + len(tokens)} nodes are in {path}.")
        missing = [n for n in tokenless if n not in tokens]
        if path and missing:
            self.stderr.write(
                f"The tokens of {shown(missing)} are not in {path} and cannot be shown again (only their "
                f"hash is kept): run again with --new-tokens to issue new ones."
            )
