"""The learning endpoint: how well the scheduler predicts co-location slowdowns (docs/LEARNING.md,
"In the service") — predicted vs measured ξ of the running pairs, and the prediction error of
the measured co-locations over time.

Reads the placement rows (``shared_with``, ``predicted_slowdown``, ``measured_slowdown``) and the
bounded ``SlowdownObservation`` log. A member sees their tenant's jobs; a partner of another
tenant is "another tenant's job", without its model or sub-batch (its ξ beside the member's job
is the member's business); an admin sees every job.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from cluster.models import Job, Placement
from common.shapes import gpu_label
from frontend.payloads.clock import time_scale
from frontend.payloads.common import JobNames, Viewer, iso, payload, rounded, table
from scheduling import figures
from scheduling.models import SlowdownObservation

#: Time bins of the error-over-time line.
ERROR_BINS = 12
#: Measured co-locations listed (newest first) beside the chart.
OBSERVATIONS_SHOWN = 500
PAIR_COLUMNS = ("job", "tenant", "beside", "GPUs", "sub-batch", "partner sub-batch", "ξ predicted")
PAIR_COLUMNS += ("ξ measured", "error %")
OBSERVATION_COLUMNS = ("started", "job", "beside", "pair (model@sub-batch)", "ξ predicted", "ξ measured")
OBSERVATION_COLUMNS += ("error %", "reports")


def relative_error(predicted: float, measured: float | None) -> float | None:
    """``|predicted − measured| / measured`` in % (``None`` before a measurement)."""
    return None if measured is None else abs(predicted - measured) / measured * 100.0


def learning_payload(viewer: Viewer, window_s: int) -> dict[str, Any]:
    """Running pairs (each job beside its partner: GPUs, sub-batches, ξ predicted when placed and
    measured since) and the measured co-locations that started in the last ``window_s`` seconds
    with their prediction error, per co-location and as the mean per time bin (MAPE)."""
    now = timezone.now()
    scale = time_scale()
    start = scale.window_start(now, window_s)
    names = JobNames()
    pairs = running_pairs(viewer, names)
    observed = observations(viewer, start, names)
    for o in observed:  # as the dashboard shows times (trace seconds during a replay)
        o["at"] = scale.at_dt(o["moment"])
    if not pairs and not observed:
        return payload(
            viewer,
            now,
            empty="No job shares a GPU now, and no co-location was measured in this window.",
        )
    bins = error_bins(observed, start, now, scale.at_dt)
    errors = [o["error"] for o in observed]
    mape = sum(errors) / len(errors) if errors else None
    summary = (
        f"{len(pairs)} running job{'s' if len(pairs) != 1 else ''} beside a partner "
        f"({sum(p['measured'] is not None for p in pairs)} measured); "
        + (
            f"{len(observed)} co-locations measured in the last {scale.window_words(window_s)}, "
            f"mean prediction error {mape:.1f} %."
            if observed
            else "no co-location measured in this window."
        )
    )
    pair_rows = [
        [p["job"], p["tenant"], p["beside"], p["gpus"], p["sub"], p["partner_sub"]]
        + [
            rounded(p["predicted"]),
            rounded(p["measured"]),
            rounded(relative_error(p["predicted"], p["measured"]), 1),
        ]
        for p in pairs
    ]
    observation_rows = [
        [o["at"], o["label"], o["beside"], o["pair"], rounded(o["predicted"]), rounded(o["measured"])]
        + [rounded(o["error"], 1), o["samples"]]
        for o in reversed(observed[-OBSERVATIONS_SHOWN:])
    ]
    figures_: dict[str, Any] = {}
    if pairs:
        figures_["slowdown_pairs"] = figures.slowdown_pairs_spec(pairs)
    if observed:
        figures_["prediction_error"] = figures.prediction_error_spec(
            [o["at"] for o in observed], errors, [b[0] for b in bins], [b[2] for b in bins], scale.axis
        )
    return payload(
        viewer,
        now,
        summary=summary,
        figures_=figures_,
        tables={
            "slowdown_pairs": table(
                PAIR_COLUMNS, pair_rows, "" if pairs else "No job of yours shares a GPU now."
            ),
            "prediction_error": table(
                ["bin start", "co-locations", "mean error %"], [[t, n, rounded(m, 1)] for t, n, m in bins]
            ),
            "observations": table(OBSERVATION_COLUMNS, observation_rows),
        },
    )


def running_pairs(viewer: Viewer, names: JobNames) -> list[dict[str, Any]]:
    """Each visible running job beside each partner it shares GPUs with: ``{"job", "label" (job
    beside partner), "tenant", "beside", "gpus", "sub", "partner_sub", "predicted", "measured"}``
    (job id order)."""
    rows = list(
        Placement.objects.filter(active=True, shared_with__isnull=False)
        .order_by("job_id", "gpu__node__name", "gpu__index")
        .values_list(
            "job_id",
            "shared_with",
            "gpu_id",
            "gpu__node__name",
            "gpu__index",
            "sub_batch",
            "predicted_slowdown",
            "measured_slowdown",
        )
    )
    subs = {(job, gpu): sub for job, _, gpu, _, _, sub, _, _ in rows}
    names.load({r[0] for r in rows} | {r[1] for r in rows})
    grouped: dict[tuple[int, int], dict[str, Any]] = {}
    for job, partner, gpu, node, index, sub, predicted, measured in rows:
        label, tenant, visible = names.label(job, viewer)
        if not visible:
            continue
        beside, _, partner_visible = names.label(partner, viewer)
        entry = grouped.setdefault(
            (job, partner),
            {
                "job": label,
                "tenant": tenant,
                "beside": beside,
                "gpus": [],
                "sub": sub,
                # another tenant's job is not described, not even by its sub-batch
                "partner_sub": subs.get((partner, gpu)) if partner_visible else None,
                "predicted": predicted,
                "measured": measured,
            },
        )
        entry["gpus"].append(gpu_label(node, index))
    for entry in grouped.values():
        entry["gpus"] = ", ".join(entry["gpus"])
        entry["label"] = f"{entry['job']} beside {entry['beside']}"
    return list(grouped.values())


def observations(viewer: Viewer, start: datetime, names: JobNames) -> list[dict[str, Any]]:
    """The visible measured co-locations that started at or after ``start``, oldest first:
    ``{"moment", "at" (ISO), "label", "beside", "pair", "predicted", "measured", "error",
    "samples"}``."""
    rows = list(
        SlowdownObservation.objects.filter(at__gte=start)
        .order_by("at", "id")
        .values_list(
            "at", "job", "partner", "model_a", "sub_a", "model_b", "sub_b", "predicted", "measured", "samples"
        )
    )
    if not viewer.is_admin:
        mine = set(
            Job.objects.filter(tenant_id=viewer.tenant_id, pk__in={r[1] for r in rows}).values_list(
                "pk", flat=True
            )
        )
        rows = [r for r in rows if r[1] in mine]
    names.load({r[1] for r in rows} | {r[2] for r in rows})
    return [
        {
            "moment": at,
            "at": iso(at),
            "label": names.label(job, viewer)[0],
            "beside": names.label(partner, viewer)[0],
            "pair": f"{model_a}@{sub_a} beside "
            + (f"{model_b}@{sub_b}" if names.label(partner, viewer)[2] else "another tenant's job"),
            "predicted": predicted,
            "measured": measured,
            "error": relative_error(predicted, measured),
            "samples": samples,
        }
        for at, job, partner, model_a, sub_a, model_b, sub_b, predicted, measured, samples in rows
    ]


def error_bins(
    observed: list[dict[str, Any]],
    start: datetime,
    now: datetime,
    at: Callable[[datetime], str | float] = iso,
) -> list[tuple[str | float, int, float | None]]:
    """``(bin start, co-locations, mean error %)`` over :data:`ERROR_BINS` equal bins of
    ``[start, now]`` (``None``: none in the bin); ``at`` shows a bin's start (ISO by default)."""
    width = max((now - start).total_seconds(), 1e-3) / ERROR_BINS
    sums = [0.0] * ERROR_BINS
    counts = [0] * ERROR_BINS
    for o in observed:
        k = min(ERROR_BINS - 1, max(0, int((o["moment"] - start).total_seconds() // width)))
        sums[k] += o["error"]
        counts[k] += 1
    return [
        (at(start + timedelta(seconds=k * width)), counts[k], sums[k] / counts[k] if counts[k] else None)
        for k in range(ERROR_BINS)
    ]
