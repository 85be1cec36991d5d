"""Simulation reports: the comparison table (stdout), the JSON document and the Plotly HTML page.

The JSON document (``build_report``) is::

    {"trace": NAME, "trace_rows": N, "rejected": {REASON: COUNT},
     "cluster": {"nodes", "gpus_per_node", "gpus", "gpu_memory_mb", "gpu_type"},
     "config": {"round_interval_s", "round_on_events", "restart_cost_s", "seed"},
     "policies": {POLICY: {"jobs", "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s",
                           "makespan_s", "avg_queue_s", "gpu_util", "shared_gpu_time_frac",
                           "per_tenant": {TENANT: {"jobs", "avg_jct_s", "gpu_hours"}},
                           "jain_gpu_hours", "mean_shared_slowdown", "unfinished",
                           "rounds", "preemptions"}}}

Times in seconds, fractions in [0, 1]; a value that does not exist (no finished job, nothing
shared) is ``null``. Files are written to a temporary name beside the target and renamed, so a
failure never leaves half a file.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scheduling.core.metrics import binned_utilisation, makespan_window, summarise
from scheduling.core.types import Cluster
from scheduling.sim.engine import SimConfig, SimResult
from scheduling.sim.loaders import LoadedTrace


def cluster_summary(cluster: Cluster) -> dict[str, Any]:
    """``{"nodes", "gpus_per_node", "gpus", "gpu_memory_mb", "gpu_type"}`` of a cluster (the
    largest node's GPU count, the first GPU's memory and type: uniform clusters)."""
    per_node: dict[str, int] = {}
    for g in cluster.gpus:
        per_node[g.node] = per_node.get(g.node, 0) + 1
    first = cluster.gpus[0]
    return {"nodes": len(per_node), "gpus_per_node": max(per_node.values()), "gpus": cluster.size,
            "gpu_memory_mb": first.memory_mb, "gpu_type": first.gpu_type}


def policy_summary(result: SimResult) -> dict[str, Any]:
    """One policy's entry of the report (see the module docstring)."""
    summary = summarise(result.outcomes, result.timeline, result.capacity_gpus)
    summary.update(
        mean_shared_slowdown=result.mean_shared_slowdown,
        unfinished=len(result.unfinished),
        rounds=result.rounds,
        preemptions=result.preemptions,
    )
    return summary


def build_report(trace: LoadedTrace, cluster: Cluster, config: SimConfig,
                 results: Mapping[str, SimResult]) -> dict[str, Any]:
    """The JSON-ready report dict (``nan`` already turned into ``None``)."""
    report = {
        "trace": trace.name,
        "trace_rows": trace.rows,
        "rejected": dict(sorted(trace.rejected.items())),
        "cluster": cluster_summary(cluster),
        "config": {"round_interval_s": config.round_interval_s, "round_on_events": config.round_on_events,
                   "restart_cost_s": config.restart_cost_s, "seed": config.seed},
        "policies": {name: policy_summary(r) for name, r in results.items()},
    }
    return _json_safe(report)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


_COLUMNS = (
    ("policy", None, "{}"),
    ("jobs", "jobs", "{:d}"),
    ("avg JCT s", "avg_jct_s", "{:,.0f}"),
    ("p50 s", "p50_jct_s", "{:,.0f}"),
    ("p95 s", "p95_jct_s", "{:,.0f}"),
    ("p99 s", "p99_jct_s", "{:,.0f}"),
    ("makespan s", "makespan_s", "{:,.0f}"),
    ("avg queue s", "avg_queue_s", "{:,.0f}"),
    ("GPU util", "gpu_util", "{:.1%}"),
    ("shared", "shared_gpu_time_frac", "{:.1%}"),
    ("preempt", "preemptions", "{:d}"),
    ("unfinished", "unfinished", "{:d}"),
)


def format_table(report: Mapping[str, Any]) -> str:
    """The comparison table: one row per policy, a footer with the trace, cluster and rejects."""
    rows = [[title for title, _, _ in _COLUMNS]]
    for name, summary in report["policies"].items():
        row = []
        for _, key, fmt in _COLUMNS:
            value = name if key is None else summary[key]
            row.append("-" if value is None else fmt.format(value))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    c = report["cluster"]
    cfg = report["config"]
    lines.append("")
    events = " and on events" if cfg["round_on_events"] else ""
    lines.append(f"trace {report['trace']}: {report['trace_rows']} rows; cluster "
                 f"{c['nodes']}x{c['gpus_per_node']} {c['gpu_type']} ({c['gpu_memory_mb']} MB); "
                 f"rounds every {cfg['round_interval_s']:g} s{events}; "
                 f"restart cost {cfg['restart_cost_s']:g} s; seed {cfg['seed']}")
    rejected = report["rejected"]
    if rejected:
        lines.append(f"rejected rows: {sum(rejected.values())} ("
                     + "; ".join(f"{reason}: {n}" for reason, n in rejected.items()) + ")")
    else:
        lines.append("rejected rows: none")
    return "\n".join(lines)


def write_files(files: Mapping[Path, str]) -> None:
    """Write each ``path → text`` (UTF-8) all-or-nothing.

    Every text is first written to a temporary file beside its target; only when all of them
    are complete are they renamed onto the targets. Raises ``OSError`` (folder missing or
    read-only, target is a folder, disk full…); the temporary files are then removed and no
    target has been touched unless the failure came from a rename after the first one.
    """
    umask = os.umask(0)
    os.umask(umask)
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in files.items():
            path = Path(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual mode
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise


def _write_atomic(path: Path, text: str) -> None:
    write_files({Path(path): text})


def json_report(report: Mapping[str, Any]) -> str:
    """The report as indented JSON text (ends with a newline)."""
    return json.dumps(report, indent=2) + "\n"


def write_json(path: str | Path, report: Mapping[str, Any]) -> None:
    """Write the report as indented JSON (atomic replace)."""
    _write_atomic(Path(path), json_report(report))


def html_report(report: Mapping[str, Any], results: Mapping[str, SimResult]) -> str:
    """A self-contained HTML page (Plotly.js inlined once): JCT CDF per policy, GPU utilisation
    over time, per-tenant mean JCT and GPU-hours, and the comparison table."""
    # Imported here so the CLI without --html never pays for importing Plotly.
    from html import escape

    from scheduling.figures import jct_cdf_figure, tenant_bars_figure, utilisation_figure

    jcts = {name: [o.jct_s for o in r.outcomes] for name, r in results.items()}
    util = {}
    for name, r in results.items():
        start, end = makespan_window(r.outcomes)
        util[name] = binned_utilisation(r.timeline, r.capacity_gpus, start, end)
    per_tenant = {name: s["per_tenant"] for name, s in report["policies"].items()}
    figures = [
        jct_cdf_figure(jcts),
        utilisation_figure(util),
        tenant_bars_figure(per_tenant),
        tenant_bars_figure(per_tenant, metric="gpu_hours", scale=1.0, title="GPU-hours per tenant",
                           axis_title="GPU-hours"),
    ]
    parts = [fig.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, fig in enumerate(figures)]
    title = f"Sharewise simulation: {report['trace']}"
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title></head><body style=\"font-family: sans-serif\">\n"
        f"<h1>{escape(title)}</h1>\n<pre>{escape(format_table(report))}</pre>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


def write_html(path: str | Path, report: Mapping[str, Any], results: Mapping[str, SimResult]) -> None:
    """Write :func:`html_report` to ``path`` (atomic replace)."""
    _write_atomic(Path(path), html_report(report, results))
