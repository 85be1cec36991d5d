"""The shared figure specs: valid Plotly (plotly.py validates every property), colour-blind-safe
colours kept per tenant, shared GPUs marked, and the simulator's report built from the same code."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from scheduling import figures

CELLS = [
    {
        "node": "node-00",
        "index": 0,
        "healthy": True,
        "jobs": [
            {"tenant": "team-a", "label": "job 1 a", "sub_batch": 64, "slowdown": 1.3},
            {"tenant": "team-c", "label": "job 2 c", "sub_batch": 32, "slowdown": 1.6},
        ],
    },
    {"node": "node-00", "index": 1, "healthy": True, "jobs": []},
    {"node": "node-01", "index": 0, "healthy": False, "jobs": []},
    {
        "node": "node-01",
        "index": 1,
        "healthy": True,
        "jobs": [{"tenant": None, "label": "another tenant's job", "sub_batch": None, "slowdown": None}],
    },
]


def all_specs() -> dict[str, figures.Spec]:
    t0, t1 = "2026-01-01T00:00:00.000Z", "2026-01-01T00:10:00.000Z"
    return {
        "jct_cdf": figures.jct_cdf_spec({"fifo": [60.0, 120.0, 3600.0]}),
        "utilisation": figures.utilisation_spec({"fifo": ([0.0, 3600.0], [0.5, 1.0])}),
        "tenant_bars": figures.tenant_bars_spec({"live": {"team-a": {"avg_jct_s": 600.0}, "team-c": {}}}),
        "cluster_map": figures.cluster_map_spec(CELLS, ["team-a", "team-c"]),
        "timeline": figures.timeline_spec(
            {
                "team-a": {
                    "gpu": ["node-00:0"],
                    "slot": [0],
                    "label": ["job 1 a"],
                    "start": [t0],
                    "end": [t1],
                    "duration_ms": [600_000],
                },
                None: {
                    "gpu": ["node-00:0"],
                    "slot": [1],
                    "label": ["another tenant's job"],
                    "start": [t0],
                    "end": [t1],
                    "duration_ms": [600_000],
                },
            },
            {"gpu": ["node-00:0"], "start": [t0], "end": [t1], "duration_ms": [600_000]},
            (t0, t1),
        ),
        "usage": figures.tenant_usage_spec([t0, t1], {"team-a": [1.0, 2.5]}, {"team-a": 4}),
        "jain": figures.jain_spec([t0, t1], [None, 0.845]),
        "queue": figures.queue_spec(
            [{"label": "job 3 w", "tenant": "team-a", "wait_s": 120.0, "gpus": 2, "position": 1}]
        ),
        "pairs": figures.pair_decisions_spec(
            [
                {
                    "label": "job 1 + job 2",
                    "t_seq_s": 1000.0,
                    "t_con_s": 800.0,
                    "xi_self": 1.3,
                    "xi_partner": 1.6,
                    "sub_batch": 64,
                }
            ]
        ),
        "round_counts": figures.round_counts_spec(
            [{"started_at": t0, "n_started": 2, "n_waiting": 1, "n_preempted": 0}]
        ),
    }


@pytest.mark.parametrize("name", sorted(all_specs()))
def test_every_spec_is_valid_plotly_json(name: str) -> None:
    spec = all_specs()[name]
    figure = go.Figure(spec)  # raises ValueError on any unknown or ill-typed property
    assert len(figure.data) == len(spec["data"])
    assert "template" not in spec["layout"]  # Plotly.js knows no template names


def test_tenant_colours_are_okabe_ito_in_name_order() -> None:
    # Okabe & Ito (2008): blue #0072B2, orange #E69F00, bluish green #009E73, ...
    assert figures.tenant_colours(["team-c", "team-a", "team-b"]) == {
        "team-a": "#0072B2",
        "team-b": "#E69F00",
        "team-c": "#009E73",
    }
    assert figures.tenant_colour(7) == figures.tenant_colour(0)  # 7 colours, then cycles


def test_cluster_map_groups_cells_and_marks_shared_gpus() -> None:
    data = figures.cluster_map_spec(CELLS, ["team-a", "team-c"])["data"]
    by_name = {t["name"]: t for t in data}
    assert list(by_name) == ["team-a", "other tenants", "free", "unhealthy", figures.SHARED_LABEL]
    assert (by_name["team-a"]["x"], by_name["team-a"]["y"]) == ([0], ["node-00"])
    assert by_name["unhealthy"]["marker"]["color"] == figures.UNHEALTHY_COLOUR
    assert by_name[figures.SHARED_LABEL]["marker"]["color"] == ["#E69F00"]  # team-c, second by name
    hover = by_name["team-a"]["text"][0]
    assert hover == (
        "node-00:0<br>job 1 a (team-a): sub-batch 64, slowdown ×1.30"
        "<br>job 2 c (team-c): sub-batch 32, slowdown ×1.60"
    )
    assert by_name["other tenants"]["text"] == ["node-01:1<br>another tenant's job"]


def test_tenant_bars_leave_gaps_for_missing_values() -> None:
    spec = figures.tenant_bars_spec(
        {"live": {"team-a": {"avg_jct_s": 600.0}, "team-c": {"avg_jct_s": None}}}, scale=1 / 60.0
    )
    assert spec["data"][0]["x"] == ["team-a", "team-c"]
    assert spec["data"][0]["y"] == [10.0, None]  # 600 s = 10 min


def test_simulator_report_uses_the_shared_builders() -> None:
    fig = figures.jct_cdf_figure({"fifo": [3600.0, 7200.0]})
    assert isinstance(fig, go.Figure)
    assert list(fig.data[0].x) == [1.0, 2.0]  # hours
    assert fig.layout.template.layout.plot_bgcolor is not None  # plotly_white resolved for HTML
