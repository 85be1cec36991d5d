"""Plotly figure builders shared by the simulator's HTML report and the live dashboard.

Each builder takes plain data (per-policy series, or per-policy per-tenant dicts) and returns a
``plotly.graph_objects.Figure``; none reads files or the database. Times on the axes are in hours
(JCT, simulated time); utilisation is a percentage of the cluster's healthy GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from scheduling.core.metrics import cdf_points

_LAYOUT = {"template": "plotly_white", "legend": {"orientation": "h", "y": -0.2}, "height": 420}


def jct_cdf_figure(jcts_s: Mapping[str, Sequence[float]], max_points: int = 1000) -> go.Figure:
    """CDF of job completion time per policy: ``{policy: [JCT (s), …]}`` → one line each (x in
    hours, log scale; y = fraction of jobs finished within x)."""
    fig = go.Figure()
    for name, values in jcts_s.items():
        xs, ys = cdf_points(values, max_points)
        fig.add_trace(go.Scatter(x=[x / 3600.0 for x in xs], y=ys, mode="lines", name=name))
    fig.update_layout(title="JCT CDF", xaxis={"title": "JCT (h)", "type": "log"},
                      yaxis={"title": "fraction of jobs", "range": [0, 1]}, **_LAYOUT)
    return fig


def utilisation_figure(series: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> go.Figure:
    """GPU utilisation over time per policy: ``{policy: (times (s), utilisation in [0, 1])}``,
    e.g. from :func:`scheduling.core.metrics.binned_utilisation`."""
    fig = go.Figure()
    for name, (times, util) in series.items():
        fig.add_trace(go.Scatter(x=[t / 3600.0 for t in times], y=[u * 100.0 for u in util],
                                 mode="lines", line={"shape": "hv"}, name=name))
    fig.update_layout(title="GPU utilisation over time", xaxis={"title": "simulated time (h)"},
                      yaxis={"title": "busy GPUs (%)", "range": [0, 100]}, **_LAYOUT)
    return fig


def tenant_bars_figure(
    per_tenant: Mapping[str, Mapping[str, Mapping[str, float]]],
    metric: str = "avg_jct_s",
    scale: float = 1 / 3600.0,
    title: str = "Mean JCT per tenant",
    axis_title: str = "mean JCT (h)",
) -> go.Figure:
    """Grouped bars, one group per tenant, one bar per policy.

    ``per_tenant``: ``{policy: {tenant: {metric: value, …}}}`` (the report's ``per_tenant``
    dicts); each value is multiplied by ``scale`` (default: seconds → hours).
    """
    tenants = sorted({t for by_tenant in per_tenant.values() for t in by_tenant})
    fig = go.Figure()
    for name, by_tenant in per_tenant.items():
        ys = [by_tenant[t][metric] * scale if t in by_tenant else None for t in tenants]
        fig.add_trace(go.Bar(x=tenants, y=ys, name=name))
    fig.update_layout(title=title, barmode="group", xaxis={"title": "tenant"},
                      yaxis={"title": axis_title}, **_LAYOUT)
    return fig
