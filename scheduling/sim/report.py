"""Simulation reports: the comparison table (stdout), the JSON document and the Plotly HTML page.

The JSON document (``build_report``) is::

    {"trace": NAME, "trace_rows": N, "rejected": {REASON: COUNT},
     "cluster": {"nodes", "gpus_per_node", "gpus", "gpu_memory_mb", "gpu_type"},
     "config": {"round_interval_s", "round_on_events", "restart_cost_s", "seed", ["fidelity"]},
     "never_fit": N,
     "policies": {POLICY: {"jobs", "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s",
                           "makespan_s", "avg_queue_s", "gpu_util", "shared_gpu_time_frac",
                           "per_tenant": {TENANT: {"jobs", "avg_jct_s", "gpu_hours"}},
                           "jain_gpu_hours", "mean_shared_slowdown", "unfinished",
                           "unfinished_reasons": {REASON: COUNT}, "rounds", "preemptions",
                           "fairness": {"jain_index", "max_wait_s", "p99_wait_s", "avg_wait_s",
                                        ["usage_vs_quota", "guarantee_violations"], ["windows"]},
                           ["learning": {"decisions", "regretted", "pair_sides", "xi_mape",
                                         "xi_mape_parts", "part_end_s", "slowdown_reports",
                                         "exclusive_reports", "profiles_built"}]}},
     "scheduler": {"starvation_bound_s", "aging_s", "reclaim", "borrow_bound_s", ["off"], ["placement"],
                   ["tiresias": {"thresholds", "service", "starvation_guard",
                                 "starvation_factor", "demoted"}]},
     ["tenant_quotas": {TENANT: {"guaranteed_gpus", "borrow_limit"}}],
     ["learning": {"prior_error", "truth_error", "learn", "measure_noise", "report_interval_s"}]}

``fairness`` (issue 6, docs/FAIRNESS.md): waits are each job's total pending time
(:func:`scheduling.core.fairness.wait_stats`); ``jain_index`` is Jain's index of the tenants'
normalised shares ``x_t = GPU-hours charged to t ÷ t's entitlement`` — its guaranteed GPUs with
quotas (:func:`scheduling.core.fairness.usage_vs_quota`; tenants guaranteed 0 GPUs left out), else
1 for every tenant (then it equals ``jain_gpu_hours``). With quotas, also ``usage_vs_quota`` per
tenant and, when the rounds were watched (:class:`scheduling.core.fairness.GuaranteeMonitor`),
``guarantee_violations``: jobs kept waiting longer than the grace by GPUs lent to other tenants.
The bracketed keys appear only with quotas, ``windows`` only with ``--windows``
(:mod:`scheduling.sim.windows`); the ``learning`` ones only with a belief
(``--prior-error``, ``--truth-error``, ``--learn``; :mod:`scheduling.sim.belief`); ``fidelity``
(:meth:`Fidelity.summary <scheduling.sim.fidelity.Fidelity.summary>`), ``placement`` and
``tiresias`` only when not at their defaults (so a default run's report is as before).

``never_fit``: accepted jobs no policy can ever start on this cluster (gang too large, or too
little GPU memory even at the smallest sub-batch); ``unfinished_reasons``: why each policy's
unfinished jobs did not finish (``REASON_*`` below).

Times in seconds, fractions in [0, 1]; a value that does not exist (no finished job, nothing
shared) is ``null``. Files are written to a temporary name beside the target and renamed, so a
failure never leaves half a file.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from common.files import write_all_atomic
from scheduling.core.fairness import usage_vs_quota, wait_stats
from scheduling.core.metrics import binned_utilisation, jain_index, makespan_window, summarise
from scheduling.core.profiles import ProfileError
from scheduling.core.quota import normalise
from scheduling.core.types import FAIR_SWITCHES, Cluster, Job, JobId, Profile, TenantQuota, TiresiasConfig
from scheduling.sim.engine import SimConfig, SimResult
from scheduling.sim.loaders import LoadedTrace
from scheduling.sim.windows import windows_summary

#: Why a job never finished (keys of ``"unfinished_reasons"`` in the report).
REASON_GANG_TOO_LARGE = "gang larger than the cluster's healthy GPUs"
REASON_MEMORY_TOO_LARGE = "too little GPU memory, even at its smallest sub-batch"
REASON_LEFT_WAITING = "could fit, but the policy left it waiting"


def never_fit_reasons(jobs: Iterable[Job], cluster: Cluster, profile: Profile) -> dict[JobId, str]:
    """Jobs that no policy can ever start on ``cluster``, with the reason (job id → ``REASON_*``).

    A gang of ``g`` GPUs needs ``g`` healthy GPUs (:data:`REASON_GANG_TOO_LARGE` otherwise),
    each with at least ``mem_j(b_min)`` MB, the job's memory per GPU at its smallest sub-batch
    ``b_min = min(profile.sub_batches(job))`` (MODEL.md §2: memory grows with the sub-batch, so
    this is the least the job can ever need) — :data:`REASON_MEMORY_TOO_LARGE` otherwise. Jobs
    whose memory the profile cannot tell (``ProfileError``) are left out: nothing is claimed.
    """
    healthy = [g.memory_mb for g in cluster.gpus if g.healthy]
    reasons: dict[JobId, str] = {}
    for job in jobs:
        if job.gpus > len(healthy):
            reasons[job.id] = REASON_GANG_TOO_LARGE
            continue
        try:
            subs = profile.sub_batches(job)
            least_mb = profile.memory_mb(job, min(subs)) if subs else math.inf
        except ProfileError:
            continue
        if sum(1 for mb in healthy if mb >= least_mb) < job.gpus:
            reasons[job.id] = REASON_MEMORY_TOO_LARGE
    return reasons


def unfinished_reasons(result: SimResult, never_fit: Mapping[JobId, str]) -> dict[str, int]:
    """``{REASON_*: count}`` over the jobs ``result`` left unfinished, most frequent first; a job
    not in ``never_fit`` counts as :data:`REASON_LEFT_WAITING`."""
    counts = Counter(never_fit.get(job_id, REASON_LEFT_WAITING) for job_id in result.unfinished)
    return dict(counts.most_common())


def unfinished_warning(policy: str, summary: Mapping[str, Any]) -> str | None:
    """One line for stderr when a policy left jobs unfinished (``None`` when it did not):
    how many, of how many, and the reasons, most frequent first."""
    unfinished = summary["unfinished"]
    if not unfinished:
        return None
    reasons = "; ".join(f"{reason}: {n}" for reason, n in summary.get("unfinished_reasons", {}).items())
    total = summary["jobs"] + unfinished
    line = f"warning: {policy} left {unfinished} of {total} jobs unfinished"
    return f"{line} ({reasons})" if reasons else line


def cluster_summary(cluster: Cluster) -> dict[str, Any]:
    """``{"nodes", "gpus_per_node", "gpus", "gpu_memory_mb", "gpu_type"}`` of a cluster (the
    largest node's GPU count, the first GPU's memory and type: uniform clusters), plus
    ``"gpu_types"`` (type → GPUs and largest memory MB) when it has several GPU types, and
    ``"gpu_groups"`` (``[type, memory MB, GPUs]`` per distinct type and memory, in GPU order) when
    its GPUs differ in type or memory (``2x8:a100:81920,2x8:a100:40960`` is one type of two sizes),
    which the table's cluster line shows."""
    per_node: dict[str, int] = {}
    for g in cluster.gpus:
        per_node[g.node] = per_node.get(g.node, 0) + 1
    first = cluster.gpus[0]
    summary: dict[str, Any] = {
        "nodes": len(per_node),
        "gpus_per_node": max(per_node.values()),
        "gpus": cluster.size,
        "gpu_memory_mb": first.memory_mb,
        "gpu_type": first.gpu_type,
    }
    kinds: dict[str, dict[str, int]] = {}
    for g in cluster.gpus:
        entry = kinds.setdefault(g.gpu_type, {"gpus": 0, "memory_mb": g.memory_mb})
        entry["gpus"] += 1
        entry["memory_mb"] = max(entry["memory_mb"], g.memory_mb)
    if len(kinds) > 1:  # several GPU types: GPU type → {"gpus", "memory_mb" (largest)}
        summary["gpu_types"] = kinds
    groups: dict[tuple[str, int], int] = {}
    for g in cluster.gpus:
        groups[(g.gpu_type, g.memory_mb)] = groups.get((g.gpu_type, g.memory_mb), 0) + 1
    if len(groups) > 1:
        summary["gpu_groups"] = [[kind, memory, n] for (kind, memory), n in groups.items()]
    return summary


def policy_summary(
    result: SimResult, never_fit: Mapping[JobId, str] | None = None, percentile_method: str = "linear"
) -> dict[str, Any]:
    """One policy's entry of the report (see the module docstring); ``never_fit`` (from
    :func:`never_fit_reasons`) explains the unfinished jobs in ``"unfinished_reasons"``;
    percentiles by ``percentile_method`` (:func:`scheduling.core.metrics.percentile`)."""
    summary = summarise(result.outcomes, result.timeline, result.capacity_gpus, percentile_method)
    summary.update(
        mean_shared_slowdown=result.mean_shared_slowdown,
        unfinished=len(result.unfinished),
        unfinished_reasons=unfinished_reasons(result, never_fit or {}),
        rounds=result.rounds,
        preemptions=result.preemptions,
    )
    if result.learning is not None:  # a run with a belief (docs/LEARNING.md §5)
        summary["learning"] = asdict(result.learning)
    return summary


def fairness_summary(
    result: SimResult,
    quotas: Mapping[str, TenantQuota] | None = None,
    violations: int | None = None,
    windows_s: Sequence[float] = (),
) -> dict[str, Any]:
    """One policy's ``"fairness"`` entry (module docstring): waits (s), Jain's index of the
    tenants' normalised shares, and with ``quotas`` (tenant → :class:`TenantQuota`) usage vs quota
    over the makespan window and ``violations`` (guarantee violations; ``None``: not watched);
    with ``windows_s`` and a run that recorded usage, ``"windows"``
    (:func:`scheduling.sim.windows.windows_summary`)."""
    outcomes = result.outcomes
    out: dict[str, Any] = {}
    if quotas:
        lo, hi = makespan_window(outcomes)
        usage = usage_vs_quota(outcomes, quotas, hi - lo if outcomes else 0.0)
        shares = [u["usage_over_quota"] for t, u in usage.items() if u["quota_gpu_hours"] > 0]
        out["jain_index"] = jain_index(shares)
    else:
        hours: dict[str, float] = {}
        for o in outcomes:
            hours[o.tenant] = hours.get(o.tenant, 0.0) + o.gpu_s / 3600.0
        out["jain_index"] = jain_index(hours.values())
    out.update(wait_stats(outcomes))
    if quotas:
        out["usage_vs_quota"] = usage
        if violations is not None:
            out["guarantee_violations"] = violations
    windows = windows_summary(result, quotas or {}, windows_s)
    if windows:
        out["windows"] = windows
    return out


def build_report(
    trace: LoadedTrace,
    cluster: Cluster,
    config: SimConfig,
    results: Mapping[str, SimResult],
    never_fit: Mapping[JobId, str] | None = None,
    violations: Mapping[str, int] | None = None,
    windows_s: Sequence[float] = (),
) -> dict[str, Any]:
    """The JSON-ready report dict (``nan`` already turned into ``None``); ``windows_s``: the
    sliding-window lengths (s) of the windowed fairness entries (none: left out).

    ``never_fit``: jobs no policy can start (:func:`never_fit_reasons`); counted in
    ``"never_fit"`` and used to explain each policy's unfinished jobs. ``None``: not checked
    (every unfinished job then counts as left waiting). The tenant quotas are
    ``config.tenant_quotas``; ``violations``: policy → guarantee violations counted while it ran.
    """
    never_fit = never_fit or {}
    violations = violations or {}
    quotas = normalise(config.tenant_quotas)
    run_config: dict[str, Any] = {
        "round_interval_s": config.round_interval_s,
        "round_on_events": config.round_on_events,
        "restart_cost_s": config.restart_cost_s,
        "seed": config.seed,
    }
    if not config.fidelity.is_default():
        run_config["fidelity"] = config.fidelity.summary()
    report: dict[str, Any] = {
        "trace": trace.name,
        "trace_rows": trace.rows,
        "rejected": dict(sorted(trace.rejected.items())),
        "cluster": cluster_summary(cluster),
        "config": run_config,
        "never_fit": len(never_fit),
        "policies": {
            name: {
                **policy_summary(r, never_fit, config.fidelity.percentile),
                "fairness": fairness_summary(r, quotas, violations.get(name), windows_s),
            }
            for name, r in results.items()
        },
    }
    sc = config.scheduler
    scheduler: dict[str, Any] = {
        "starvation_bound_s": sc.starvation_bound_s,
        "aging_s": sc.aging_s,
        "reclaim": sc.reclaim,
        "borrow_bound_s": sc.borrow_bound_s,
    }
    report["scheduler"] = scheduler
    off = [name for name in FAIR_SWITCHES if not getattr(sc, name)]
    if off:  # only when set, so the reports of the defaults stay as they were
        scheduler["off"] = off
    if sc.placement != "spread":
        scheduler["placement"] = sc.placement
    if sc.tiresias != TiresiasConfig():
        t = sc.tiresias
        scheduler["tiresias"] = {
            "thresholds": list(t.thresholds),
            "service": t.service,
            "starvation_guard": t.starvation_guard,
            "starvation_factor": t.starvation_factor,
            "demoted": t.demoted,
        }
    if quotas:
        report["tenant_quotas"] = {
            t: {"guaranteed_gpus": q.guaranteed_gpus, "borrow_limit": q.borrow_limit}
            for t, q in sorted(quotas.items())
        }
    return _json_safe(report)


def format_fairness_table(report: Mapping[str, Any]) -> str:
    """Per policy: Jain's index of normalised shares, max and p99 wait (h), guarantee violations
    (``-`` when not watched), and a line with the tenant quotas."""
    h = 3600.0
    lines = [f"{'fairness':<16} {'Jain':>6} {'max wait h':>10} {'p99 wait h':>10} {'guar.viol':>9}"]

    def num(value: Any, fmt: str) -> str:
        return "-" if value is None else fmt.format(value)

    for name, summary in report["policies"].items():
        f = summary["fairness"]
        lines.append(
            f"{name:<16} {num(f['jain_index'], '{:.3f}'):>6} "
            f"{num(f['max_wait_s'] and f['max_wait_s'] / h, '{:.2f}'):>10} "
            f"{num(f['p99_wait_s'] and f['p99_wait_s'] / h, '{:.2f}'):>10} "
            f"{num(f.get('guarantee_violations'), '{:d}'):>9}"
        )
    quotas = report.get("tenant_quotas", {})
    lines.append(
        "quotas (guaranteed GPUs): " + ", ".join(f"{t} {q['guaranteed_gpus']}" for t, q in quotas.items())
    )
    return "\n".join(lines)


def fidelity_lines(report: Mapping[str, Any]) -> list[str]:
    """The table's lines on the fidelity knobs and baseline settings not at their defaults
    (none for a default run)."""
    out: list[str] = []
    fid = report["config"].get("fidelity")
    if fid is not None:
        out.append(
            f"fidelity: iteration time x{fid['iteration_time_factor']:g}; first-start overhead "
            f"{fid['first_start_overhead']}; relaunch overhead {fid['relaunch_overhead']}; re-plan "
            f"{fid['replan']} (charged at {fid['charge']}); rounds at horizon "
            f"{'on' if fid['rounds_at_horizon'] else 'off'}; percentiles {fid['percentile']}"
        )
    sc = report.get("scheduler", {})
    if "placement" in sc:
        out.append(f"placement of the exclusive baselines: {sc['placement']}")
    t = sc.get("tiresias")
    if t is not None:
        guard = f"guard on (factor {t['starvation_factor']:g})" if t["starvation_guard"] else "guard off"
        unit = "GPU-s" if t["service"] == "gpu_s" else "s"
        out.append(
            f"tiresias: thresholds {', '.join(f'{x:g}' for x in t['thresholds'])} {unit}; {guard}; "
            f"demoted jobs {t['demoted']}"
        )
    return out


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
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    c = report["cluster"]
    cfg = report["config"]
    lines.append("")
    events = " and on events" if cfg["round_on_events"] else ""
    rounds = (
        f"rounds every {cfg['round_interval_s']:g} s{events}"
        if cfg["round_interval_s"]
        else "rounds on events"
    )
    shape = (
        " + ".join(f"{n} {kind} ({memory} MB)" for kind, memory, n in c["gpu_groups"])
        if "gpu_groups" in c
        else f"{c['nodes']}x{c['gpus_per_node']} {c['gpu_type']} ({c['gpu_memory_mb']} MB)"
    )
    lines.append(
        f"trace {report['trace']}: {report['trace_rows']} rows; cluster {shape}; "
        f"{rounds}; restart cost {cfg['restart_cost_s']:g} s; seed {cfg['seed']}"
    )
    lines.extend(fidelity_lines(report))
    rejected = report["rejected"]
    if rejected:
        lines.append(
            f"rejected rows: {sum(rejected.values())} ("
            + "; ".join(f"{reason}: {n}" for reason, n in rejected.items())
            + ")"
        )
    else:
        lines.append("rejected rows: none")
    never_fit = report.get("never_fit", 0)
    if never_fit:
        lines.append(f"jobs that can never start on this cluster: {never_fit} (see the unfinished column)")
    return "\n".join(lines)


def json_report(report: Mapping[str, Any]) -> str:
    """The report as indented JSON text (ends with a newline)."""
    return json.dumps(report, indent=2) + "\n"


def write_json(path: str | Path, report: Mapping[str, Any]) -> None:
    """Write the report as indented JSON (atomic replace)."""
    write_all_atomic({Path(path): json_report(report)})


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
        tenant_bars_figure(
            per_tenant, metric="gpu_hours", scale=1.0, title="GPU-hours per tenant", axis_title="GPU-hours"
        ),
    ]
    parts = [fig.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, fig in enumerate(figures)]
    title = f"Sharewise simulation: {report['trace']}"
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f'<title>{escape(title)}</title></head><body style="font-family: sans-serif">\n'
        f"<h1>{escape(title)}</h1>\n<pre>{escape(format_table(report))}</pre>\n"
        + "\n".join(parts)
        + "\n</body></html>\n"
    )


def write_html(path: str | Path, report: Mapping[str, Any], results: Mapping[str, SimResult]) -> None:
    """Write :func:`html_report` to ``path`` (atomic replace)."""
    write_all_atomic({Path(path): html_report(report, results)})
