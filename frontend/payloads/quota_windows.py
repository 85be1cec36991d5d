"""The quota-and-windows endpoint: per tenant, where it stands against its quota now (borrowed,
over quota, per GPU type) and its GPU-hours over the last 2 h and 24 h beside its guarantee; and
the windowed fairness of each window (docs/FAIRNESS.md §1 "Over quota" and §4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.utils import timezone

from cluster.compiled import kept_rows
from cluster.models import Tenant
from frontend.payloads.clock import TimeScale, time_scale
from frontend.payloads.common import Viewer, payload, rounded, table
from frontend.payloads.service import DEFAULT_WINDOWS_S, quota_rows, quota_use, summed_quotas, usage_windows
from scheduling import figures


def window_name(window_s: int, scale: TimeScale) -> str:
    """``last 2 h``, ``last 30 min``: how a window is named on the panel; during a replay
    (``scale``, :func:`~frontend.payloads.clock.time_scale`) ``last 2 h of trace time``."""
    words = f"last {window_s / 3600:g} h" if window_s % 3600 == 0 else f"last {window_s / 60:g} min"
    return scale.of_time(words)


def _tenants_by_name() -> Any:
    """``(id, name)`` of every tenant in name order (a queryset,
    :func:`~cluster.compiled.kept_rows`)."""
    return Tenant.objects.order_by("name").values_list("pk", "name")


def quota_windows_payload(viewer: Viewer) -> dict[str, Any]:
    """Per visible tenant (name order): guaranteed GPUs, borrow limit, GPUs held, borrowed and over
    quota now (total, and per GPU type where its quota has rows per type), then per window
    (:data:`~scheduling.service.DEFAULT_WINDOWS_S`) the GPU-hours charged (a shared GPU split by
    normalised progress), the guarantee's GPU-hours and their ratio. Table ``window_fairness``:
    each window's Jain's index and max/min ratio of ``GPU-hours ÷ guaranteed GPUs`` over the
    tenants that had work for at least half of it — cluster-wide; a member sees how many
    tenants it is taken over, an admin their names. Figure ``window_share``: the ratios.

    During a replay (docs/DASHBOARD.md, "Trace time in the demo") a window is trace seconds
    (:meth:`~frontend.payloads.clock.TimeScale.window_start`: never before the replay began, the
    guarantee's GPU-hours over that part only) and GPU-hours are trace GPU-hours (wall × speed-up,
    :meth:`~frontend.payloads.clock.TimeScale.seconds`); ratios and Jain's index are the same in
    either unit."""
    now = timezone.now()
    scale = time_scale()
    names = dict(kept_rows(_tenants_by_name))
    if not names:
        return payload(viewer, now, empty="No tenants yet: create one with manage.py create_tenant.")
    windows = DEFAULT_WINDOWS_S
    visible = {t: n for t, n in names.items() if viewer.sees(t)}
    # the quota rows read once, for the quotas now and the windows' guarantees; an admin sees
    # every tenant: no need to narrow the placements to the visible tenants' GPUs (a semi-join
    # over every job, the query's dearest part)
    quotas = quota_rows()
    use = quota_use(visible, rows=quotas, every_tenant=len(visible) == len(names))
    guaranteed = {t: q.guaranteed_gpus for t, q in summed_quotas((t, g, b) for t, _, g, b in quotas).items()}
    # the wall seconds each window covers (fewer than it names in a replay)
    lengths = [(now - scale.window_start(now, w)).total_seconds() for w in windows]
    usage = usage_windows(windows, now, visible, cached=True, guaranteed=guaranteed, lengths_s=lengths)
    rows: list[list[Any]] = []
    shares: dict[str, dict[str, dict[str, float | None]]] = {window_name(w, scale): {} for w in windows}
    for t, name in visible.items():
        total = use[t].total
        typed = ", ".join(
            f"{gpu_type or 'any'}: {state.gpus_over_quota:.3g}"
            for gpu_type, state in use[t].per_type.items()
            if state.over_quota
        )
        row: list[Any] = [
            name,
            total.guaranteed_gpus,
            "unlimited" if total.borrow_limit is None else total.borrow_limit,
            round(total.gpus_in_use, 3),
            round(total.gpus_borrowed, 3),
            round(total.gpus_over_quota, 3),
            typed or "-",
        ]
        for w in usage.per_tenant[t]:
            shown = (round(scale.seconds(w.gpu_hours), 3), round(scale.seconds(w.quota_gpu_hours), 3))
            row += [*shown, rounded(w.share_of_quota, 3)]
            shares[window_name(w.window_s, scale)][name] = {"share": w.share_of_quota}
        rows.append(row)
    over = [f"{n} ({use[t].total.gpus_over_quota:.3g} GPUs)" for t, n in visible.items() if use[t].over_quota]
    fairness_rows = [
        [
            window_name(f.window_s, scale),
            rounded(f.jain_index, 3),
            rounded(f.max_min_ratio, 3),
            ", ".join(names[t] for t in f.tenants) if viewer.is_admin else len(f.tenants),
        ]
        for f in usage.fairness
    ]
    return payload(
        viewer,
        now,
        summary=_summary(over, fairness_rows),
        figures_={
            "window_share": figures.tenant_bars_spec(
                shares,
                "share",
                1.0,
                "GPU-hours ÷ guaranteed GPU-hours per tenant",
                "share of the guarantee",
            )
        },
        tables={
            "quota_windows": table(
                _columns(windows, scale),
                rows,
                " ".join(n for n in ("Over quota: above guaranteed + borrow limit.", scale.note) if n),
            ),
            "window_fairness": table(
                ["window", "Jain's index", "max/min", "tenants compared"],
                fairness_rows,
                "Over the tenants with a guarantee that had work for at least half of the window "
                "(docs/FAIRNESS.md §4).",
            ),
        },
    )


def _columns(windows: Sequence[int], scale: TimeScale) -> list[str]:
    """The ``quota_windows`` table's columns: quota now, then three per window."""
    columns = [
        "tenant",
        "guaranteed GPUs",
        "borrow limit",
        "GPUs held now",
        "GPUs borrowed now",
        "GPUs over quota now",
        "over quota per GPU type",
    ]
    for w in windows:
        name = window_name(w, scale)
        columns += [f"GPU-hours ({name})", f"guaranteed GPU-hours ({name})", f"share of guarantee ({name})"]
    return columns


def _summary(over: Sequence[str], fairness_rows: Sequence[Sequence[Any]]) -> str:
    """Who is over quota, and each window's Jain's index."""
    figures_now = "; ".join(f"{r[0]} {r[1] if r[1] is not None else 'n/a'}" for r in fairness_rows)
    flagged = f"Over quota: {', '.join(over)}." if over else "No tenant is over quota."
    return f"{flagged} Windowed Jain's index of GPU-hours ÷ guarantee: {figures_now}."
