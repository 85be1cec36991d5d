"""Cluster shapes (``NODESxGPUS``) and node names, the same for the simulator, the service's
``load_cluster``, the demo and the agent's ``--fleet``, so a simulated cluster and a live one
carry the same node names."""

from __future__ import annotations

import re
from collections.abc import Iterable

from common.limits import MAX_GPU_MEMORY_MB

#: Most GPUs one node may have (no server holds more).
MAX_GPUS_PER_NODE = 64
#: Most GPUs a shape may have in total (the simulator keeps every GPU in memory).
MAX_TOTAL_GPUS = 100_000

_SHAPE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


class ShapeError(ValueError):
    """A cluster shape that is malformed or out of bounds; the message says which and why."""


class ShapeTooLargeError(ShapeError):
    """A well-formed cluster shape beyond a bound: GPUs per node, nodes, or GPUs in total."""


def parse_shape(text: str, *, max_nodes: int | None = None) -> tuple[int, int]:
    """``"4x8"`` → ``(4, 8)``: nodes, GPUs per node.

    Raises :class:`ShapeError` for a text that is not ``NODESxGPUS`` or fewer than one node or GPU
    per node, and its subclass :class:`ShapeTooLargeError` for more than :data:`MAX_GPUS_PER_NODE`
    GPUs per node, more than ``max_nodes`` nodes (when given) or more than :data:`MAX_TOTAL_GPUS`
    GPUs in total.
    """
    match = _SHAPE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ShapeError(f"cluster shape must look like NODESxGPUS, e.g. 4x8; got {text!r}")
    nodes, gpus = int(match[1]), int(match[2])
    check_shape(nodes, gpus, max_nodes=max_nodes)
    return nodes, gpus


def check_shape(nodes: int, gpus_per_node: int, *, max_nodes: int | None = None) -> None:
    """Raise :class:`ShapeError` unless ``nodes`` × ``gpus_per_node`` is a possible cluster (see
    :func:`parse_shape` for the bounds)."""
    if nodes < 1 or gpus_per_node < 1:
        raise ShapeError(
            f"a cluster needs at least one node and one GPU per node, got {nodes}x{gpus_per_node}"
        )
    if gpus_per_node > MAX_GPUS_PER_NODE:
        raise ShapeTooLargeError(f"at most {MAX_GPUS_PER_NODE} GPUs per node, got {gpus_per_node}")
    if max_nodes is not None and nodes > max_nodes:
        raise ShapeTooLargeError(f"at most {max_nodes:,} nodes, got {nodes:,}")
    if nodes * gpus_per_node > MAX_TOTAL_GPUS:
        raise ShapeTooLargeError(f"at most {MAX_TOTAL_GPUS:,} GPUs in total, got {nodes * gpus_per_node:,}")


def gpu_label(node: str, index: int) -> str:
    """``"node-02:3"``: GPU ``index`` of node ``node``, the one way every part of Sharewise names a
    GPU (the service's decisions and reasons, the dashboard, the simulator's policies)."""
    return f"{node}:{index}"


def gpu_list(gpus: Iterable[tuple[str, int]]) -> str:
    """``"node-02:0,1; node-03:4"``: ``(node, index)`` pairs grouped by node, in first-seen order
    (:func:`gpu_label` of one GPU, ``node:i,j`` for several on one node)."""
    by_node: dict[str, list[str]] = {}
    for node, index in gpus:
        by_node.setdefault(node, []).append(str(index))
    return "; ".join(f"{node}:{','.join(indices)}" for node, indices in by_node.items())


def node_names(nodes: int, prefix: str = "node", start: int = 0) -> list[str]:
    """``prefix-00``, ``prefix-01``, …: ``nodes`` names numbered from ``start``, with two digits
    at least and as many as the largest number needs (``node-000`` … ``node-127`` for 128)."""
    last = start + nodes - 1
    width = max(2, len(str(max(last, 0))))
    return [f"{prefix}-{n:0{width}d}" for n in range(start, start + nodes)]


#: Largest GPU memory (MB) a cluster spec may name: the API's bound (1 TiB).
MAX_SPEC_MEMORY_MB = MAX_GPU_MEMORY_MB
_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$")


def parse_cluster_spec(
    text: str, *, max_nodes: int | None = None
) -> list[tuple[int, int, str | None, int | None]]:
    """A cluster spec → its node groups ``(nodes, GPUs per node, GPU type, memory MB per GPU)``.

    ``"4x8"`` → ``[(4, 8, None, None)]`` (type and memory left to the caller's defaults);
    ``"2x8:a100:81920,4x8:t4:16384"`` → ``[(2, 8, "a100", 81920), (4, 8, "t4", 16384)]``: groups
    separated by commas, each ``NODESxGPUS`` or ``NODESxGPUS:TYPE:MEMORY_MB`` (a type is 1–32
    letters, digits, ``.``, ``_``, ``-``). Raises :class:`ShapeError` naming the bad group (a
    shape as :func:`parse_shape` checks it, a type or memory missing or malformed, memory outside
    1…:data:`MAX_SPEC_MEMORY_MB` MB) and :class:`ShapeTooLargeError` when the groups together pass
    ``max_nodes`` nodes or :data:`MAX_TOTAL_GPUS` GPUs.
    """
    if not isinstance(text, str) or not text.strip():
        raise ShapeError("cluster spec is empty; e.g. 4x8 or 2x8:a100:81920,4x8:t4:16384")
    groups: list[tuple[int, int, str | None, int | None]] = []
    for part in text.split(","):
        fields = [f.strip() for f in part.split(":")]
        if len(fields) not in (1, 3):
            raise ShapeError(
                f"node group {part.strip()!r} must look like NODESxGPUS or NODESxGPUS:TYPE:MEMORY_MB"
            )
        nodes, gpus = parse_shape(fields[0], max_nodes=max_nodes)
        if len(fields) == 1:
            groups.append((nodes, gpus, None, None))
            continue
        kind, memory = fields[1], fields[2]
        if not _TYPE.match(kind):
            raise ShapeError(
                f"node group {part.strip()!r}: GPU type {kind!r} must be 1-32 letters, digits, '.', '_', '-'"
            )
        if not memory.isdigit() or not 1 <= int(memory) <= MAX_SPEC_MEMORY_MB:
            raise ShapeError(
                f"node group {part.strip()!r}: memory must be 1 to {MAX_SPEC_MEMORY_MB} MB, got {memory!r}"
            )
        groups.append((nodes, gpus, kind, int(memory)))
    total_nodes = sum(g[0] for g in groups)
    total = sum(g[0] * g[1] for g in groups)
    if max_nodes is not None and total_nodes > max_nodes:
        raise ShapeTooLargeError(f"at most {max_nodes:,} nodes, got {total_nodes:,}")
    if total > MAX_TOTAL_GPUS:
        raise ShapeTooLargeError(f"at most {MAX_TOTAL_GPUS:,} GPUs in total, got {total:,}")
    return groups
