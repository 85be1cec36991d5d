"""The fairness endpoint: per tenant over a window, GPUs in use against quota, Jain's index over
time, mean JCT and queueing delay, GPU-hours; and the cluster-wide scheduler settings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Avg, Count, Min, Q, Sum
from django.utils import timezone

from cluster.compiled import kept_rows
from cluster.expressions import EpochSeconds
from cluster.models import Job, Quota, Tenant
from frontend.payloads.bins import curve_bins, demand_bins, finished_bins
from frontend.payloads.clock import TimeScale, time_scale
from frontend.payloads.common import Viewer, payload, rounded, table
from frontend.payloads.service import policy_named, scheduler_config, summed_quotas, window_charge
from scheduling import figures
from scheduling.core.metrics import jain_index
from scheduling.core.quota import NO_QUOTA, reclaim_in_effect
from scheduling.core.quota_state import quota_state
from scheduling.core.types import Policy, SchedulerConfig, TenantQuota

#: Equal time bins of the window (usage, demand and Jain's index per bin).
FAIRNESS_BINS = 30

#: How the summary names each reclaim mode (``SchedulerConfig.reclaim``, docs/FAIRNESS.md §1).
RECLAIM_WORDS = {
    "preempt": "preemption",
    "bound": "bounding borrowers' remaining time",
    "both": "preemption and bounding borrowers' remaining time",
}


class TenantJobs(NamedTuple):
    """What one tenant's jobs add up to: succeeded jobs, mean JCT (s, submit → finish, succeeded
    jobs), mean queueing delay (s, submit → first start, started jobs), pending jobs, GPUs of its
    running gangs, and the submission (epoch s) of its oldest pending or running job."""

    finished: int = 0
    avg_jct_s: float | None = None
    avg_queue_s: float | None = None
    pending: int = 0
    in_use: int | None = None
    first_active: float | None = None


def fairness_payload(viewer: Viewer, window_s: int) -> dict[str, Any]:
    """Per tenant over the last ``window_s`` s: GPUs in use vs quota (stacked), Jain's index over
    time, mean JCT and queueing delay, GPU-hours.

    Jain's index (Jain, Chiu & Hawe 1984) of bin k is taken over the tenants with a guaranteed
    quota that had work (a pending or running job) in that bin, of ``x_t = GPUs in use ÷
    guaranteed GPUs``: 1 when every such tenant gets the same multiple of its quota. It is the
    same for every viewer (a cluster-wide figure that names no job). Mean JCT (submit → finish)
    is over the tenant's succeeded jobs; mean queueing delay (submit → first start) over its
    started jobs; GPU-hours over the window, a shared GPU split by normalised progress
    (docs/FAIRNESS.md §3; ½ each when the pair's slowdowns are unknown).

    Quotas (docs/FAIRNESS.md §1): guaranteed GPUs and borrow limit summed over the tenant's
    ``Quota`` rows (the scheduling service's ``summed_quotas``; "unlimited": no limit, "none": no
    quota row); GPUs held now = GPUs of its running gangs; borrowed now = those above the guarantee
    within the borrow limit, over quota now = those above guaranteed + borrow limit
    (:func:`scheduling.core.quota_state.quota_state`). Table ``scheduler``: the cluster-wide
    starvation bound, aging, reclaim mode and borrow bound; the summary names the policy
    (``SHAREWISE_POLICY``) and how it actually reclaims lent GPUs.
    """
    now = timezone.now()
    scale = time_scale()
    start = scale.window_start(now, window_s)
    tenants = dict(kept_rows(_tenants))
    if not tenants:
        return payload(viewer, now, empty="No tenants yet: create one with manage.py create_tenant.")
    quotas = summed_quotas(kept_rows(_quotas))
    guaranteed = {t: q.guaranteed_gpus for t, q in quotas.items()}
    config, policy = scheduler_config(), policy_named()
    # bins of wall seconds (a replay's window never reaches back before the replay began)
    width_s = max((now - start).total_seconds(), 1e-3) / FAIRNESS_BINS
    # what can no longer change is summed once and cached (scheduling.service.closed_charge)
    part = window_charge(start.timestamp(), now.timestamp())
    charged = curve_bins((part.closed, part.open), start.timestamp(), width_s, FAIRNESS_BINS)
    jobs, finished = tenant_jobs_and_bins(start, now, width_s)
    demand = demand_bins(
        start, now, width_s, FAIRNESS_BINS, {t: j.first_active for t, j in jobs.items()}, finished
    )
    jain = jain_per_bin(tenants, charged, demand, guaranteed, width_s)
    visible = {t: n for t, n in tenants.items() if viewer.sees(t)}
    times = [scale.at(start.timestamp() + k * width_s) for k in range(FAIRNESS_BINS)]
    usage = _gpus_in_use(visible, charged, width_s)
    shown_jobs, shown_charged = shown_in(scale, jobs, charged)
    per_tenant, rows = _tenant_rows(visible, shown_jobs, shown_charged, quotas)
    minutes = scale.window_words(window_s)
    tenants_table = _tenants_table(rows, minutes)
    tenants_table["note"] = scale.note
    return payload(
        viewer,
        now,
        summary=_summary(jain, minutes, policy, config, bool(jobs))
        + mean_jct_words(visible, shown_jobs, scale),
        figures_={
            "usage": figures.tenant_usage_spec(
                times, usage, {visible[t]: guaranteed.get(t, 0) for t in visible}, scale.axis
            ),
            **(
                {"jain": figures.jain_spec(times, jain, scale.axis)}
                if any(j is not None for j in jain)
                else {}
            ),
            **_per_tenant_bars({"live": per_tenant}, minutes, "trace min" if scale.is_trace else "min"),
        },
        tables={
            "scheduler": _scheduler_table(config, policy),
            "tenants": tenants_table,
            "usage": _usage_table(times, usage, jain),
        },
    )


def _tenants() -> Any:
    """``(id, name)`` of every tenant (a queryset, :func:`~cluster.compiled.kept_rows`)."""
    return Tenant.objects.values_list("id", "name")


def _quotas() -> Any:
    """``(tenant id, guaranteed GPUs, borrow limit)`` of every quota row (a queryset,
    :func:`~cluster.compiled.kept_rows`)."""
    return Quota.objects.order_by().values_list("tenant_id", "guaranteed_gpus", "borrow_limit")


def shown_in(
    scale: TimeScale, jobs: Mapping[int, TenantJobs], charged: Mapping[int, Sequence[float]]
) -> tuple[dict[int, TenantJobs], dict[int, list[float]]]:
    """The tenants' mean JCT and queueing delay (s) and GPU-seconds per bin as ``scale`` shows
    them (trace seconds during a replay: wall durations × speedup; the demo's terminal computes
    its JCTs the same way, ``demo.report.live_result``)."""
    shown = {
        t: j._replace(
            avg_jct_s=None if j.avg_jct_s is None else scale.seconds(j.avg_jct_s),
            avg_queue_s=None if j.avg_queue_s is None else scale.seconds(j.avg_queue_s),
        )
        for t, j in jobs.items()
    }
    return shown, {t: [scale.seconds(v) for v in values] for t, values in charged.items()}


def mean_jct_words(visible: Mapping[int, str], jobs: Mapping[int, TenantJobs], scale: TimeScale) -> str:
    """``" Mean JCT of the 61 succeeded jobs: 1,917 s of trace time."``: over the succeeded jobs
    of the ``visible`` tenants (each tenant's mean weighted by its succeeded jobs); empty when
    there are none."""
    done = [
        (jobs[t].finished, jobs[t].avg_jct_s) for t in visible if t in jobs and jobs[t].avg_jct_s is not None
    ]
    n = sum(f for f, _ in done)
    if not n:
        return ""
    mean = sum(f * (a or 0.0) for f, a in done) / n
    unit = "s of trace time" if scale.is_trace else "s"
    return f" Mean JCT of the {n} succeeded job{'s' if n != 1 else ''}: {mean:,.0f} {unit}."


def tenant_jobs_and_bins(
    start: datetime, now: datetime, width_s: float
) -> tuple[dict[int, TenantJobs], list[tuple[int, float, float]]]:
    """``{tenant id: TenantJobs}`` of every tenant with a job (one pass over the jobs) and the rows
    of :func:`~frontend.payloads.bins.finished_bins` (bins of ``width_s`` s from ``start``), read
    in one statement (one round trip instead of two)."""
    jobs_sql, jobs_params = _tenant_jobs_sql()
    bins_sql, bins_params = finished_bins(start, now, width_s).query.sql_with_params()
    # the bins go in the two float columns (avg_jct, avg_queue): a count column would turn float
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 0, * FROM ({jobs_sql}) jobs "
            f"UNION ALL SELECT 1, tenant_id, NULL, lo, hi, NULL, NULL, NULL FROM ({bins_sql}) bins",
            (*jobs_params, *bins_params),
        )
        rows = cursor.fetchall()
    jobs = {tenant_id: TenantJobs(*rest) for kind, tenant_id, *rest in rows if kind == 0}
    return jobs, [(tenant_id, lo, hi) for kind, tenant_id, _, lo, hi, *_ in rows if kind == 1]


@cache
def _tenant_jobs_sql() -> tuple[str, tuple[Any, ...]]:
    """The SQL of the per-tenant job figures of :func:`tenant_jobs_and_bins` (and its constant
    parameters), compiled once per process: compiling these seven filtered aggregates cost the
    ORM about as much as running them."""
    succeeded = Q(status=Job.Status.SUCCEEDED, finished_at__isnull=False)
    query = (
        Job.objects.values("tenant_id")
        .annotate(
            finished=Count("id", filter=succeeded),
            avg_jct=Avg(EpochSeconds("finished_at") - EpochSeconds("submitted_at"), filter=succeeded),
            avg_queue=Avg(
                EpochSeconds("started_at") - EpochSeconds("submitted_at"),
                filter=Q(started_at__isnull=False),
            ),
            pending=Count("id", filter=Q(status=Job.Status.PENDING)),
            in_use=Sum("gpus", filter=Q(status=Job.Status.RUNNING)),
            first_active=EpochSeconds(
                Min("submitted_at", filter=Q(finished_at__isnull=True, status__in=Job.ACTIVE_STATUSES))
            ),
        )
        .values_list("tenant_id", "finished", "avg_jct", "avg_queue", "pending", "in_use", "first_active")
    )
    sql, params = query.query.sql_with_params()
    return sql, tuple(params)


def jain_per_bin(
    tenants: Iterable[int],
    charged: Mapping[int, Sequence[float]],
    demand: Mapping[int, Sequence[bool]],
    guaranteed: Mapping[int, int],
    width_s: float,
) -> list[float | None]:
    """Jain's index per bin (3 decimals) of ``GPUs in use ÷ guaranteed GPUs`` over the
    ``tenants`` with a guarantee that had work in the bin; ``None`` for a bin with no such tenant
    or where none of them held a GPU (``jain_index`` would say 1.0 of all zeros).

    ``charged``: ``{tenant id: [GPU-seconds per bin]}`` (:func:`usage_bins`); ``demand``:
    ``{tenant id: [had work per bin]}`` (:func:`demand_bins`); ``width_s``: bin width (s).
    """
    tenants = list(tenants)
    jain: list[float | None] = []
    for k in range(FAIRNESS_BINS):
        xs = [
            charged.get(t, [0.0] * FAIRNESS_BINS)[k] / width_s / guaranteed[t]
            for t in tenants
            if guaranteed.get(t, 0) > 0 and demand.get(t, [False] * FAIRNESS_BINS)[k]
        ]
        # no share of anything to compare while none of them holds a GPU: no figure, not 1.0
        jain.append(rounded(jain_index(xs), 3) if any(xs) else None)
    return jain


def _gpus_in_use(
    visible: Mapping[int, str], charged: Mapping[int, Sequence[float]], width_s: float
) -> dict[str, list[float]]:
    """``{tenant name: [mean GPUs in use per bin]}`` (3 decimals) of the ``visible`` tenants
    (``{id: name}``), from their GPU-seconds per bin (``charged``) over bins of ``width_s`` s."""
    return {
        visible[t]: [round(s / width_s, 3) for s in charged.get(t, [0.0] * FAIRNESS_BINS)] for t in visible
    }


def _tenant_rows(
    visible: Mapping[int, str],
    jobs: Mapping[int, TenantJobs],
    charged: Mapping[int, Sequence[float]],
    quotas: Mapping[int, TenantQuota],
) -> tuple[dict[str, dict[str, float | None]], list[list[Any]]]:
    """Per visible tenant, in name order: ``{name: {"avg_jct_s", "avg_queue_s", "gpu_hours"}}``
    for the bar charts and the row of the ``tenants`` table (columns of :func:`_tenants_table`)."""
    per_tenant: dict[str, dict[str, float | None]] = {}
    rows = []
    for t, name in sorted(visible.items(), key=lambda kv: kv[1]):
        mine = jobs.get(t, TenantJobs())
        gpu_hours = sum(charged.get(t, ())) / 3600.0
        per_tenant[name] = {
            "avg_jct_s": mine.avg_jct_s,
            "avg_queue_s": mine.avg_queue_s,
            "gpu_hours": gpu_hours,
        }
        quota = quotas.get(t)
        guaranteed = quota.guaranteed_gpus if quota is not None else 0
        limit: int | str = "none"  # no Quota row: no guarantee, may only borrow
        if quota is not None:
            limit = "unlimited" if quota.borrow_limit is None else quota.borrow_limit
        state = quota_state(mine.in_use or 0, quota or NO_QUOTA)
        rows.append(
            [
                name,
                guaranteed,
                limit,
                state.gpus_in_use,
                state.gpus_borrowed,
                state.gpus_over_quota,
                round(gpu_hours, 3),
                mine.finished,
                mine.pending,
                rounded(mine.avg_jct_s, 1),
                rounded(mine.avg_queue_s, 1),
            ]
        )
    return per_tenant, rows


def reclaim_words(config: SchedulerConfig, policy: Policy) -> str:
    """How ``policy`` actually reclaims lent GPUs under ``config``, in words: those of the mode in
    effect (:func:`scheduling.core.quota.reclaim_in_effect`, the answer the quota gate follows and
    the ``scheduler`` table shows), and when that is not the configured mode, why.
    """
    mode = reclaim_in_effect(config.reclaim, getattr(policy, "reclaims", False))
    if mode == config.reclaim:
        return RECLAIM_WORDS[mode]
    return (
        f"{RECLAIM_WORDS[mode]} ({policy.name} never preempts, so "
        f"SHAREWISE_RECLAIM={config.reclaim} does not apply)"
    )


def _summary(
    jain: Sequence[float | None], minutes: str, policy: Policy, config: SchedulerConfig, any_jobs: bool
) -> str:
    """The latest Jain's index ("—" with why when there is none: no jobs yet, or no tenant with a
    quota and work held a GPU), the policy, the starvation bound and how lent GPUs come back."""
    current = next((j for j in reversed(jain) if j is not None), None)
    reclaim = reclaim_words(config, policy)
    why = "no jobs yet" if not any_jobs else "no tenant with a quota and work held a GPU"
    return (
        f"Jain's index now: {current if current is not None else f'— ({why})'}; "
        f"GPU-hours over the last {minutes}. Policy {policy.name}; starvation bound "
        f"{config.starvation_bound_s / 3600:g} h; borrowed GPUs reclaimed by {reclaim}. "
        f"GPUs held count a shared GPU once for each of its two jobs, so they may add up to more "
        f"than the cluster."
    )


def _per_tenant_bars(live: Mapping[str, Any], minutes: str, unit: str = "min") -> dict[str, Any]:
    """The mean JCT, mean queueing delay and GPU-hours bar charts (each left out when no tenant
    has a value). ``live``: ``{"live": {tenant name: {"avg_jct_s", "avg_queue_s", "gpu_hours"}}}``."""
    return {
        **_bars(live, "jct", "avg_jct_s", 1 / 60.0, "Mean JCT per tenant", f"mean JCT ({unit})"),
        **_bars(
            live,
            "queueing",
            "avg_queue_s",
            1 / 60.0,
            "Mean queueing delay per tenant",
            f"mean queueing delay ({unit})",
        ),
        **_bars(live, "gpu_hours", "gpu_hours", 1.0, f"GPU-hours per tenant (last {minutes})", "GPU-hours"),
    }


def _bars(
    live: Mapping[str, Any], name: str, metric: str, scale: float, title: str, axis: str
) -> dict[str, Any]:
    """``{name: per-tenant bars}``, or nothing when no tenant has a value (no empty axes)."""
    if all(values.get(metric) is None for values in live["live"].values()):
        return {}
    return {name: figures.tenant_bars_spec(live, metric, scale, title, axis, colour_by_tenant=True)}


def _scheduler_table(config: SchedulerConfig, policy: Policy) -> dict[str, Any]:
    """The cluster-wide scheduler settings (s, the reclaim mode set and the one in effect under
    ``policy``, :func:`scheduling.core.quota.reclaim_in_effect`)."""
    return table(
        ["setting", "value"],
        [
            ["starvation bound s", config.starvation_bound_s],
            ["aging s", config.aging_s],
            ["reclaim (set)", config.reclaim],
            [
                f"reclaim (in effect under {policy.name})",
                reclaim_in_effect(config.reclaim, getattr(policy, "reclaims", False)),
            ],
            ["borrow bound s", config.borrow_bound_s],
        ],
        "Cluster-wide (settings SHAREWISE_STARVATION_BOUND_S, SHAREWISE_AGING_S, SHAREWISE_RECLAIM, "
        "SHAREWISE_BORROW_BOUND_S; docs/FAIRNESS.md). Only a policy that preempts (sjf-bsbf-fair) "
        "reclaims by preemption; every other one bounds borrowers' remaining time.",
    )


def _tenants_table(rows: Iterable[Sequence[Any]], minutes: str) -> dict[str, Any]:
    """The per-tenant table of :func:`_tenant_rows`."""
    return table(
        [
            "tenant",
            "guaranteed GPUs",
            "borrow limit",
            "GPUs held now",
            "GPUs borrowed now",
            "GPUs over quota now",
            f"GPU-hours ({minutes})",
            "succeeded jobs",
            "pending jobs",
            "mean JCT s",
            "mean queueing delay s",
        ],
        rows,
    )


def _usage_table(
    times: Sequence[str], usage: Mapping[str, Sequence[float]], jain: Sequence[float | None]
) -> dict[str, Any]:
    """Per bin: its start, each tenant's GPUs in use (:func:`_gpus_in_use`) and Jain's index."""
    return table(
        ["bin start", *usage, "Jain's index"],
        ([times[k], *(usage[n][k] for n in usage), jain[k]] for k in range(FAIRNESS_BINS)),
    )
