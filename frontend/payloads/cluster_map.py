"""The cluster map endpoint: nodes × GPUs coloured by tenant, shared GPUs marked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.utils import timezone

from cluster.compiled import kept_rows
from cluster.models import GPU, Node, Placement
from common.shapes import gpu_label
from frontend.payloads import memo
from frontend.payloads.common import (
    HIDDEN,
    Viewer,
    job_label,
    payload,
    rounded,
    table,
    visible_tenants,
)
from frontend.payloads.rounds import latest_rounds
from scheduling import figures


def cluster_map_payload(viewer: Viewer) -> Mapping[str, Any]:
    """Nodes × GPUs coloured by tenant, shared GPUs marked, hover with jobs, sub-batches and
    slowdowns (the latest round's ξ for jobs it paired, else the profile's)."""
    now = timezone.now()
    gpus = kept_rows(_gpus)
    if not gpus:
        return payload(
            viewer,
            now,
            empty="No GPUs registered yet: register a node "
            "(manage.py add_node, or start a node agent) and its GPUs appear here.",
        )
    placed = _active_placements()
    rounds = latest_rounds(1, waits=False)  # only its shares' ξ are shown
    tenants = visible_tenants(viewer)
    # the body depends on these rows alone (a round's record never changes): built again only
    # when one of them differs (frontend.payloads.memo)
    inputs = (gpus, placed, rounds[0].pk if rounds else None, tenants)
    return memo.built_from(
        ("cluster-map", viewer.tenant_id, viewer.tenant_name),
        inputs,
        now,
        lambda: _body(viewer, now, gpus, placed, rounds[0].slowdowns if rounds else {}, tenants),
    )


def _body(
    viewer: Viewer,
    now: Any,
    gpus: Sequence[tuple],
    placed: Sequence[tuple],
    from_round: Mapping[int, float],
    tenants: Sequence[str],
) -> dict[str, Any]:
    """The cluster map's body from its rows: ``gpus`` (id, node, index, healthy, node status),
    the active placements (:func:`_active_placements`), the latest round's ``{job id: ξ}`` and
    the tenants ``viewer`` sees."""
    on_gpu: dict[int, list[tuple]] = {}
    for row in placed:
        on_gpu.setdefault(row[0], []).append(row)
    # a GPU's cell depends on its row, its placements and the round's ξ of its two jobs alone:
    # after a round only the GPUs it changed are built again (this viewer's cells of the last body)
    viewer_key = (viewer.tenant_id, viewer.tenant_name)
    kept = _kept_cells.get(viewer_key, {})
    built: dict[int, KeptCell] = {}
    for gpu in gpus:
        mine = tuple(on_gpu.get(gpu[0], ()))
        fingerprint = (gpu, mine, tuple(from_round.get(r[3]) for r in mine) if len(mine) == 2 else ())
        old = kept.get(gpu[0])
        built[gpu[0]] = old if old is not None and old[0] == fingerprint else _cell(fingerprint, viewer)
    _kept_cells.pop(viewer_key, None)  # put last: the viewer least recently polled goes first
    _kept_cells[viewer_key] = built
    while len(_kept_cells) > MAX_VIEWERS:
        _kept_cells.pop(next(iter(_kept_cells)), None)
    cells = [cell for _, cell, _ in built.values()]
    rows = [row for *_, own in built.values() for row in own]
    return payload(
        viewer,
        now,
        summary=_summary(cells),
        figures_={"cluster_map": figures.cluster_map_spec(cells, tenants)},
        tables={
            "cluster_map": table(
                ["GPU", "tenant", "job", "sub-batch", "slowdown ξ", "shared"],
                rows,
                "" if rows else "No GPU is in use.",
            )
        },
    )


#: Viewers (tenant id and name) whose cells this process keeps, the oldest dropped first.
MAX_VIEWERS = 16
# (fingerprint: GPU row, its placements, the round's ξ of its pair; cell; its table rows)
KeptCell = tuple[tuple[Any, ...], dict[str, Any], list[list[Any]]]
# viewer (tenant id, tenant name) → {GPU id: KeptCell} of the last body built for it
_kept_cells: dict[tuple[Any, Any], dict[int, KeptCell]] = {}


def forget() -> None:
    """Drop this process's kept cells (tests that start a fresh database whose ids repeat)."""
    _kept_cells.clear()


def _cell(fingerprint: tuple[Any, ...], viewer: Viewer) -> KeptCell:
    """One GPU's cell (with its hover text) and table rows, from its fingerprint (:func:`_body`)."""
    (_, node, index, healthy, node_status), placed, slowdowns = fingerprint
    from_round = {r[3]: xi for r, xi in zip(placed, slowdowns, strict=False) if xi is not None}
    cell: dict[str, Any] = {
        "node": node,
        "index": index,
        "healthy": bool(healthy) and node_status != Node.Status.UNHEALTHY,
        "jobs": _gpu_jobs(placed, from_round, viewer),
    }
    cell["hover"] = figures.cell_hover(cell)
    return fingerprint, cell, _table_rows([cell])


def _active_placements() -> list[tuple]:
    """``[(GPU id, slot, sub-batch, job id, job name, model, tenant id, tenant name)]`` of the
    active placements, by GPU and slot."""
    return kept_rows(_active_placements_query)


def _active_placements_query() -> Any:
    """The query of :func:`_active_placements` (:func:`~cluster.compiled.kept_rows`)."""
    return (
        Placement.objects.filter(active=True)
        .order_by("gpu_id", "slot")
        .values_list(
            "gpu_id",
            "slot",
            "sub_batch",
            "job_id",
            "job__name",
            "job__model",
            "job__tenant_id",
            "job__tenant__name",
        )
    )


def _gpus() -> Any:
    """``(GPU id, node name, index, healthy, node status)`` of every GPU in node, index order
    (a queryset, :func:`~cluster.compiled.kept_rows`)."""
    return GPU.objects.order_by("node__name", "index").values_list(
        "id", "node__name", "index", "healthy", "node__status"
    )


def _gpu_jobs(placed: Sequence[tuple], from_round: Mapping[int, float], viewer: Viewer) -> list[dict]:
    """The jobs on one GPU as ``viewer`` may see them: ``{"tenant", "label", "sub_batch",
    "slowdown"}`` (all but the label ``None`` for another tenant's job). ``placed``: the GPU's
    rows of :func:`_active_placements`; ``from_round``: the latest round's ``{job id: ξ}``."""
    jobs = []
    for i, (_, _, sub, job_id, name, model, tenant_id, tenant) in enumerate(placed):
        slowdown = None
        if len(placed) == 2:
            other = placed[1 - i]
            slowdown = from_round.get(job_id) or _profile_slowdown(model, sub, other[5], other[2])
        if viewer.sees(tenant_id):
            jobs.append(
                {
                    "tenant": tenant,
                    "label": job_label(job_id, name),
                    "sub_batch": sub,
                    "slowdown": rounded(slowdown),
                }
            )
        else:
            jobs.append({"tenant": None, "label": HIDDEN, "sub_batch": None, "slowdown": None})
    return jobs


def _profile_slowdown(model_a: str, sub_a: int, model_b: str, sub_b: int) -> float:
    """``ξ`` of ``model_a`` at micro-batch ``sub_a`` sharing a GPU with ``model_b`` at ``sub_b``,
    from the shipped profile (measured pair, else the fitted predictor; MODEL.md §2)."""
    from scheduling.profiles import load_default_profile

    profile = load_default_profile()
    xi, _ = profile.type_slowdown(profile.job_type_for(model_a, sub_a), profile.job_type_for(model_b, sub_b))
    return xi


def _table_rows(cells: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    """One row per job on a GPU: GPU, tenant, job, sub-batch, ξ, whether the GPU is shared."""
    rows = []
    for cell in cells:
        jobs = cell["jobs"]
        for job in jobs:
            rows.append(
                [
                    gpu_label(cell["node"], cell["index"]),
                    job["tenant"] or "another tenant",
                    job["label"],
                    job["sub_batch"],
                    job["slowdown"],
                    "yes" if len(jobs) > 1 else "no",
                ]
            )
    return rows


def _summary(cells: Sequence[Mapping[str, Any]]) -> str:
    """Nodes, GPUs, healthy, busy, shared and free GPUs in one line; free: healthy and running
    nothing (an unhealthy GPU takes no job, so it is not free even when idle)."""
    busy = sum(1 for c in cells if c["jobs"])
    free = sum(1 for c in cells if c["healthy"] and not c["jobs"])
    shared = sum(1 for c in cells if len(c["jobs"]) > 1)
    healthy = sum(1 for c in cells if c["healthy"])
    nodes = len({c["node"] for c in cells})
    return (
        f"{nodes} nodes, {len(cells)} GPUs ({healthy} healthy): {busy} in use, {shared} shared by two "
        f"jobs, {free} free."
    )
