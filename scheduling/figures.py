"""Plotly figures shared by the simulator's HTML report and the live dashboard.

One code path, two renderers: every ``*_spec`` builder takes plain data and returns a Plotly
figure as plain JSON (``{"data": [trace, …], "layout": {…}}``, the shape ``Plotly.react`` takes
and ``plotly.graph_objects.Figure`` accepts). The dashboard's JSON endpoints send these dicts as
they are; the simulator's report wraps them in ``go.Figure`` (the ``*_figure`` functions) to write
HTML. None reads files or the database.

Units: times on the report's axes in hours (JCT, simulated time); live axes use wall-clock
timestamps (ISO 8601 strings, UTC) on a date axis (:data:`DATE_AXIS`), or, during a replay, trace
seconds on the ``time_axis`` the caller passes (``{"type": "linear", …}``); utilisation is a
percentage of the cluster's healthy GPUs.
Colours come from the Okabe–Ito palette (Okabe & Ito, "Color Universal Design", 2008), which
stays distinguishable under the common colour-vision deficiencies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from common.shapes import gpu_label
from scheduling.core.metrics import cdf_points

if TYPE_CHECKING:  # plotly is imported only by the callers that render HTML
    import plotly.graph_objects as go

Spec = dict[str, Any]

#: Okabe–Ito colours without black (kept for marks drawn over colours), in plotting order.
PALETTE: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
#: A GPU that is free, one used by another tenant (tenant view), one that is unhealthy.
FREE_COLOUR, OTHER_COLOUR, UNHEALTHY_COLOUR = "#F2F2F2", "#9E9E9E", "#4D4D4D"
#: The mark drawn on shared GPUs and shared intervals, and its legend entry on the cluster map.
SHARED_COLOUR = "#000000"
SHARED_LABEL = "shared by two jobs (dot: second job's tenant)"

# Plotly.js knows no template names, so the light look is spelt out (``to_figure`` adds the
# named template for the report's HTML, where plotly.py resolves it).
_LAYOUT: Spec = {
    "colorway": list(PALETTE),
    "paper_bgcolor": "#FFFFFF",
    "plot_bgcolor": "#FFFFFF",
    "legend": {"orientation": "h", "y": -0.2},
    "height": 420,
}
_AXIS: Spec = {"gridcolor": "#E5E5E5", "zerolinecolor": "#CCCCCC"}
#: The default x axis of a live chart over time: ISO 8601 timestamps (UTC).
DATE_AXIS: Spec = {"type": "date", "title": {"text": "time (UTC)"}}


def _time_axis(time_axis: Mapping[str, Any] | None, **extra: Any) -> Spec:
    """The x axis over time: ``time_axis`` (dates by default), with ``extra`` settings."""
    return {**(DATE_AXIS if time_axis is None else time_axis), **extra}


def tenant_colour(index: int) -> str:
    """The palette colour of the ``index``-th tenant (tenants sorted by name; cycles past 7)."""
    return PALETTE[index % len(PALETTE)]


def tenant_colours(tenants: Sequence[str]) -> dict[str, str]:
    """``{tenant: colour}`` for tenants in a stable (sorted) order, so a tenant keeps its colour
    across the charts of one page."""
    return {t: tenant_colour(i) for i, t in enumerate(sorted(set(tenants)))}


def _layout(title: str, **extra: Any) -> Spec:
    layout = {**_LAYOUT, "title": {"text": title}}
    layout.update(extra)
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {**_AXIS, **layout.get(axis, {})}
    return layout


def to_figure(spec: Spec) -> go.Figure:
    """A ``plotly.graph_objects.Figure`` of a spec (validates it; for HTML output)."""
    import plotly.graph_objects as go

    fig = go.Figure(spec)
    fig.update_layout(template="plotly_white")
    return fig


# ---------------------------------------------------------------- simulator report (per policy)
def jct_cdf_spec(jcts_s: Mapping[str, Sequence[float]], max_points: int = 1000) -> Spec:
    """CDF of job completion time per policy: ``{policy: [JCT (s), …]}`` → one line each (x in
    hours, log scale; y = fraction of jobs finished within x)."""
    data = []
    for name, values in jcts_s.items():
        xs, ys = cdf_points(values, max_points)
        trace = {"type": "scatter", "x": [x / 3600.0 for x in xs], "y": ys, "mode": "lines", "name": name}
        data.append(trace)
    return {
        "data": data,
        "layout": _layout(
            "JCT CDF",
            xaxis={"title": {"text": "JCT (h)"}, "type": "log"},
            yaxis={"title": {"text": "fraction of jobs"}, "range": [0, 1]},
        ),
    }


def utilisation_spec(series: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> Spec:
    """GPU utilisation over time per policy: ``{policy: (times (s), utilisation in [0, 1])}``,
    e.g. from :func:`scheduling.core.metrics.binned_utilisation`."""
    data = [
        {
            "type": "scatter",
            "x": [t / 3600.0 for t in times],
            "y": [u * 100.0 for u in util],
            "mode": "lines",
            "line": {"shape": "hv"},
            "name": name,
        }
        for name, (times, util) in series.items()
    ]
    return {
        "data": data,
        "layout": _layout(
            "GPU utilisation over time",
            xaxis={"title": {"text": "simulated time (h)"}},
            yaxis={"title": {"text": "busy GPUs (%)"}, "range": [0, 100]},
        ),
    }


def tenant_bars_spec(
    per_tenant: Mapping[str, Mapping[str, Mapping[str, float | None]]],
    metric: str = "avg_jct_s",
    scale: float = 1 / 3600.0,
    title: str = "Mean JCT per tenant",
    axis_title: str = "mean JCT (h)",
    colour_by_tenant: bool = False,
) -> Spec:
    """Grouped bars, one group per tenant, one bar per series (a policy, or ``live``).

    ``per_tenant``: ``{series: {tenant: {metric: value, …}}}`` (the report's ``per_tenant``
    dicts, or the dashboard's per-tenant figures); each value is multiplied by ``scale`` (default:
    seconds → hours); a missing or ``None`` value leaves a gap. ``colour_by_tenant`` (one
    series, the live dashboard): each bar takes its tenant's colour, as on the other charts.
    """
    tenants = sorted({t for by_tenant in per_tenant.values() for t in by_tenant})
    data: list[Spec] = []
    for name, by_tenant in per_tenant.items():
        ys = []
        for t in tenants:
            value = by_tenant.get(t, {}).get(metric)
            ys.append(None if value is None else value * scale)
        data.append({"type": "bar", "x": tenants, "y": ys, "name": name})
    if colour_by_tenant:
        colours = tenant_colours(tenants)
        for trace in data:
            trace["marker"] = {"color": [colours[t] for t in tenants]}
    layout = _layout(
        title,
        barmode="group",
        xaxis={"title": {"text": "tenant"}},
        yaxis={"title": {"text": axis_title}},
        showlegend=not colour_by_tenant,
    )
    return {"data": data, "layout": layout}


def jct_cdf_figure(jcts_s: Mapping[str, Sequence[float]], max_points: int = 1000) -> go.Figure:
    """:func:`jct_cdf_spec` as a ``go.Figure``."""
    return to_figure(jct_cdf_spec(jcts_s, max_points))


def utilisation_figure(series: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> go.Figure:
    """:func:`utilisation_spec` as a ``go.Figure``."""
    return to_figure(utilisation_spec(series))


def tenant_bars_figure(
    per_tenant: Mapping[str, Mapping[str, Mapping[str, float | None]]],
    metric: str = "avg_jct_s",
    scale: float = 1 / 3600.0,
    title: str = "Mean JCT per tenant",
    axis_title: str = "mean JCT (h)",
) -> go.Figure:
    """:func:`tenant_bars_spec` as a ``go.Figure``."""
    return to_figure(tenant_bars_spec(per_tenant, metric, scale, title, axis_title))


# ---------------------------------------------------------------- live cluster (dashboard)
def cluster_map_spec(cells: Sequence[Mapping[str, Any]], tenants: Sequence[str] = ()) -> Spec:
    """Nodes × GPUs, each GPU a square coloured by the tenant using it; shared GPUs marked.

    ``cells``: one per GPU, ``{"node": str, "index": int, "healthy": bool, "jobs": [job, …]}``
    where each job is ``{"tenant": str | None, "label": str, "sub_batch": int,
    "slowdown": float | None}`` (``tenant`` ``None``: another tenant's job, hidden). The colour
    is the first job's tenant; a GPU holding two jobs gets a black ring (the shared mark).
    ``tenants``: names that should keep their colours even when idle (sorted order decides).
    """
    colours = tenant_colours([*tenants, *(j["tenant"] for c in cells for j in c["jobs"] if j["tenant"])])
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for cell in cells:
        if not cell["healthy"]:
            key = "unhealthy"
        elif not cell["jobs"]:
            key = "free"
        else:
            key = cell["jobs"][0]["tenant"] or "other tenants"
        groups.setdefault(key, []).append(cell)
    fixed = {"free": FREE_COLOUR, "unhealthy": UNHEALTHY_COLOUR, "other tenants": OTHER_COLOUR}
    order = [t for t in colours if t in groups]
    order += [k for k in ("other tenants", "free", "unhealthy") if k in groups]
    data: list[Spec] = []
    for key in order:
        members = groups[key]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": key,
                "x": [c["index"] for c in members],
                "y": [c["node"] for c in members],
                "text": [c.get("hover") or cell_hover(c) for c in members],
                "hoverinfo": "text",
                "marker": {
                    "symbol": "square",
                    "size": 22,
                    "color": colours.get(key, fixed.get(key)),
                    "line": {"width": 1, "color": "#BDBDBD"},
                },
            }
        )
    shared = [c for c in cells if len(c["jobs"]) > 1]
    if shared:
        # the mark: a black-ringed inner dot in the second job's tenant colour
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": SHARED_LABEL,
                "x": [c["index"] for c in shared],
                "y": [c["node"] for c in shared],
                "text": [c.get("hover") or cell_hover(c) for c in shared],
                "hoverinfo": "text",
                "marker": {
                    "symbol": "circle",
                    "size": 12,
                    "line": {"width": 3, "color": SHARED_COLOUR},
                    "color": [colours.get(c["jobs"][1]["tenant"] or "", OTHER_COLOUR) for c in shared],
                },
            }
        )
    nodes = sorted({c["node"] for c in cells})
    width = max((c["index"] for c in cells), default=0) + 1
    layout = _layout(
        "Cluster map",
        height=min(4000, 190 + 34 * max(len(nodes), 1)),
        xaxis={"title": {"text": "GPU index"}, "dtick": 1, "range": [-0.6, width - 0.4], "zeroline": False},
        yaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": nodes[::-1],
            "automargin": True,
        },
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        margin={"t": 80, "b": 50},
    )
    return {"data": data, "layout": layout}


def cell_hover(cell: Mapping[str, Any]) -> str:
    """A cell's hover text: its GPU, each job's line, or free (a cell may carry it as "hover")."""
    head = gpu_label(cell["node"], cell["index"]) + ("" if cell["healthy"] else " (unhealthy)")
    if not cell["jobs"]:
        return f"{head}<br>free"
    lines = [head]
    for job in cell["jobs"]:
        slowdown = "" if job.get("slowdown") is None else f", slowdown ×{job['slowdown']:.2f}"
        if job["tenant"] is None:
            lines.append(job["label"])
        else:
            lines.append(f"{job['label']} ({job['tenant']}): sub-batch {job['sub_batch']}{slowdown}")
    return "<br>".join(lines)


#: The columns of one group of timeline bars (:func:`timeline_spec`), one list each, bar by bar.
BAR_COLUMNS = ("gpu", "slot", "label", "start", "end", "duration_ms")


def timeline_spec(
    bars: Mapping[str | None, Mapping[str, Sequence[Any]]],
    shared: Mapping[str, Sequence[Any]],
    window: tuple[Any, Any],
    time_axis: Mapping[str, Any] | None = None,
) -> Spec:
    """Gantt chart of jobs on GPUs: one row per GPU, a bar per placement, shared intervals hatched.

    ``bars``: ``{tenant name, or None for other tenants' jobs: columns}``, the columns of
    :data:`BAR_COLUMNS` as lists of equal length, bar by bar (``gpu``: ``"node-00:3"``, ``slot``:
    0|1, ``label``, ``start``/``end``: ISO times, ``duration_ms``): columns, not a dict per bar.
    Slot 0 is drawn in the upper half of the row and slot 1 in the lower half, so two jobs on one
    GPU stay visible. ``shared``: columns ``gpu``, ``start``, ``end``, ``duration_ms`` of the
    intervals during which a GPU held two jobs. ``window``: ``(start, end)`` of the x axis (ISO
    times). On a non-date ``time_axis`` (trace seconds), ``start``/``end``/``window`` are seconds
    and ``duration_ms`` is ms of that time. Hover: a template over ``customdata`` [start, end].
    """
    per_ms = 1.0 if (time_axis or DATE_AXIS).get("type") == "date" else 1e-3  # a date axis counts ms
    colours = tenant_colours([t for t, c in bars.items() if t and c["gpu"]])
    data: list[Spec] = []
    for key in [*colours, None]:
        members = bars.get(key)
        if not members or not members["gpu"]:
            continue
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": key or "other tenants",
                "y": members["gpu"],
                "base": members["start"],
                "x": [d * per_ms for d in members["duration_ms"]],
                "offset": [-0.45 if slot == 0 else 0.0 for slot in members["slot"]],
                "width": 0.45,  # one number for every bar of the trace
                "marker": {"color": colours.get(key or "", OTHER_COLOUR)},
                "text": members["label"],
                "textposition": "inside",
                "insidetextanchor": "start",
                "customdata": [[a, b] for a, b in zip(members["start"], members["end"], strict=True)],
                "hovertemplate": f"%{{text}} ({key or 'another tenant'}) on %{{y}}<br>"
                "%{customdata[0]} → %{customdata[1]}<extra></extra>",
            }
        )
    if shared["gpu"]:
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": "shared interval",
                "y": shared["gpu"],
                "base": shared["start"],
                "x": [d * per_ms for d in shared["duration_ms"]],
                "offset": -0.48,
                "width": 0.96,
                "marker": {
                    "color": "rgba(0,0,0,0)",
                    "line": {"color": SHARED_COLOUR, "width": 1.5},
                    "pattern": {"shape": "/", "fgcolor": SHARED_COLOUR, "size": 6, "solidity": 0.2},
                },
                "customdata": [[a, b] for a, b in zip(shared["start"], shared["end"], strict=True)],
                "hovertemplate": "%{y} shared<br>%{customdata[0]} → %{customdata[1]}<extra></extra>",
            }
        )
    gpus = sorted({g for c in bars.values() for g in c["gpu"]}, key=_gpu_sort_key)
    layout = _layout(
        "Timeline of jobs on GPUs",
        barmode="overlay",
        height=min(4000, 160 + 26 * max(len(gpus), 1)),
        xaxis=_time_axis(time_axis, range=list(window)),
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": gpus[::-1], "automargin": True},
    )
    return {"data": data, "layout": layout}


def _gpu_sort_key(label: str) -> tuple[str, int]:
    node, _, index = label.rpartition(":")
    return node, int(index) if index.isdigit() else 0


def tenant_usage_spec(
    times: Sequence[Any],
    usage: Mapping[str, Sequence[float]],
    quotas: Mapping[str, int],
    time_axis: Mapping[str, Any] | None = None,
) -> Spec:
    """GPUs in use per tenant over time (stacked areas) with each tenant's quota (dotted line).

    ``times``: bin start times (ISO); ``usage``: ``{tenant: [mean GPUs in use per bin]}`` (a
    shared GPU split between its two jobs, so the stack never exceeds the busy GPUs);
    ``quotas``: ``{tenant: guaranteed GPUs}``.
    """
    colours = tenant_colours([*usage, *quotas])
    data: list[Spec] = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{t} in use",
            "x": list(times),
            "y": list(usage[t]),
            "stackgroup": "usage",
            "line": {"shape": "hv", "color": colours[t]},
        }
        for t in colours
        if t in usage
    ]
    if times:
        data.extend(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{t} quota",
                "x": [times[0], times[-1]],
                "y": [q, q],
                "line": {"dash": "dot", "width": 2, "color": colours[t]},
            }
            for t, q in sorted(quotas.items())
        )
    return {
        "data": data,
        "layout": _layout(
            "GPUs in use vs quota",
            xaxis=_time_axis(time_axis),
            yaxis={"title": {"text": "GPUs"}, "rangemode": "tozero"},
        ),
    }


def jain_spec(
    times: Sequence[Any], index: Sequence[float | None], time_axis: Mapping[str, Any] | None = None
) -> Spec:
    """Jain's fairness index over time (``None``: no tenant had work in that bin; a gap)."""
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Jain's index",
            "x": list(times),
            "y": list(index),
            "line": {"shape": "hv", "color": PALETTE[0]},
        }
    ]
    return {
        "data": data,
        "layout": _layout(
            "Jain's fairness index",
            xaxis=_time_axis(time_axis),
            yaxis={"title": {"text": "index (1 = fair)"}, "range": [0, 1.05]},
            height=320,
        ),
    }


def queue_spec(jobs: Sequence[Mapping[str, Any]]) -> Spec:
    """Waiting jobs in policy order (first to be considered at the top), bar = wait so far (min).

    ``jobs``: ``{"label": str, "tenant": str | None, "wait_s": float, "gpus": int,
    "position": int, "gpu_types": list[str] (optional; the hover names them)}`` in policy order.
    """
    colours = tenant_colours([j["tenant"] for j in jobs if j["tenant"]])
    labels = [f"#{j['position']} {j['label']}" for j in jobs]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "wait so far",
            "y": labels,
            "x": [j["wait_s"] / 60.0 for j in jobs],
            "marker": {"color": [colours.get(j["tenant"] or "", OTHER_COLOUR) for j in jobs]},
            "hovertext": [
                f"{j['label']} ({j['tenant'] or 'another tenant'}), {j['gpus']} GPUs"
                f"{' of type ' + ' or '.join(j['gpu_types']) if j.get('gpu_types') else ''}, "
                f"waiting {j['wait_s'] / 60.0:.1f} min"
                for j in jobs
            ],
            "hoverinfo": "text",
        }
    ]
    layout = _layout(
        "Queue in policy order",
        height=min(3000, 190 + 30 * max(len(jobs), 1)),
        showlegend=False,
        xaxis={"title": {"text": "waiting (min)"}, "rangemode": "tozero"},
        yaxis={
            "type": "category",
            "categoryorder": "array",
            "categoryarray": labels[::-1],
            "automargin": True,
        },
    )
    return {"data": data, "layout": layout}


def pair_decisions_spec(pairs: Sequence[Mapping[str, Any]]) -> Spec:
    """Sharing decisions: predicted mean completion time of each pair run in sequence (T_seq) vs
    concurrently (T_con), MODEL.md §2 (Luo et al., IWQoS 2024: share only when T_con < T_seq).

    ``pairs``: ``{"label": str, "t_seq_s": float, "t_con_s": float, "xi_self": float,
    "xi_partner": float, "sub_batch": int}``.
    """
    labels = [p["label"] for p in pairs]
    hover = [
        f"{p['label']}<br>T_seq {p['t_seq_s']:.0f} s, T_con {p['t_con_s']:.0f} s<br>"
        f"ξ self {p['xi_self']:.2f}, ξ partner {p['xi_partner']:.2f}, sub-batch {p['sub_batch']}"
        for p in pairs
    ]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "T_seq (one after the other)",
            "y": labels,
            "x": [p["t_seq_s"] for p in pairs],
            "marker": {"color": PALETTE[1]},
            "hovertext": hover,
            "hoverinfo": "text",
        },
        {
            "type": "bar",
            "orientation": "h",
            "name": "T_con (shared)",
            "y": labels,
            "x": [p["t_con_s"] for p in pairs],
            "marker": {"color": PALETTE[0]},
            "hovertext": hover,
            "hoverinfo": "text",
        },
    ]
    return {
        "data": data,
        "layout": _layout(
            "Sharing decisions: predicted T_seq vs T_con",
            barmode="group",
            height=min(3000, 180 + 40 * max(len(pairs), 1)),
            xaxis={"title": {"text": "predicted mean completion time (s)"}},
            yaxis={"automargin": True, "autorange": "reversed"},
        ),
    }


def round_counts_spec(
    rounds: Sequence[Mapping[str, Any]], time_axis: Mapping[str, Any] | None = None
) -> Spec:
    """Started, waiting and preempted jobs per round (stacked bars), oldest round first.

    ``rounds``: ``{"started_at": ISO time, "n_started", "n_waiting", "n_preempted"}``.
    """
    xs = [r["started_at"] for r in rounds]
    data = [
        {"type": "bar", "name": name, "x": xs, "y": [r[key] for r in rounds], "marker": {"color": colour}}
        for name, key, colour in (
            ("started", "n_started", PALETTE[2]),
            ("waiting", "n_waiting", PALETTE[1]),
            ("preempted", "n_preempted", PALETTE[5]),
        )
    ]
    return {
        "data": data,
        "layout": _layout(
            "Jobs per round",
            barmode="stack",
            height=300,
            xaxis=_time_axis(time_axis),
            yaxis={"title": {"text": "jobs"}},
        ),
    }


def slowdown_pairs_spec(pairs: Sequence[Mapping[str, Any]]) -> Spec:
    """Predicted vs measured slowdown ξ of each running job beside its GPU partner (MODEL.md §2,
    docs/LEARNING.md): ``pairs``: ``{"label": str, "predicted": float, "measured": float | None}``
    (``None``: not measured yet, a gap)."""
    labels = [p["label"] for p in pairs]
    data = [
        {"type": "bar", "orientation": "h", "name": name, "y": labels, "x": [p[key] for p in pairs]}
        | {"marker": {"color": colour}}
        for name, key, colour in (
            ("predicted ξ", "predicted", PALETTE[1]),
            ("measured ξ", "measured", PALETTE[0]),
        )
    ]
    layout = _layout(
        "Running pairs: predicted vs measured slowdown ξ",
        barmode="group",
        height=min(3000, 180 + 40 * max(len(pairs), 1)),
        xaxis={"title": {"text": "ξ (shared ÷ exclusive iteration time)"}},
        yaxis={"automargin": True, "autorange": "reversed"},
    )
    return {"data": data, "layout": layout}


def prediction_error_spec(
    times: Sequence[Any],
    errors: Sequence[float],
    bin_times: Sequence[Any],
    bin_mape: Sequence[float | None],
    time_axis: Mapping[str, Any] | None = None,
) -> Spec:
    """Error of the slowdown predictions over time: each measured co-location's
    ``|ξ_predicted − ξ_measured| / ξ_measured`` (%, points, at its start) and their mean per time
    bin (MAPE, line; ``None``: no measurement in the bin, a gap)."""
    data = [
        {"type": "scatter", "mode": "markers", "name": "one co-location", "x": list(times), "y": list(errors)}
        | {"marker": {"color": PALETTE[4], "size": 6}},
        {"type": "scatter", "mode": "lines+markers", "name": "mean per bin (MAPE)", "x": list(bin_times)}
        | {"y": list(bin_mape), "line": {"shape": "hv", "color": PALETTE[0]}},
    ]
    return {
        "data": data,
        "layout": _layout(
            "Slowdown prediction error over time",
            xaxis=_time_axis(time_axis),
            yaxis={"title": {"text": "|predicted − measured| / measured (%)"}, "rangemode": "tozero"},
            height=340,
        ),
    }
