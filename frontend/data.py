"""What the dashboard shows, read from the database and scoped to the viewer.

Each ``*_payload`` function returns the JSON body of one dashboard endpoint::

    {"scope": "cluster" | "tenant team-a", "generated_at": ISO time (UTC),
     "empty": None | "why there is nothing to show",
     "summary": "one line of text",
     "figures": {name: Plotly figure spec (scheduling.figures)},
     "tables": {name: {"columns": [str, …], "rows": [[cell, …], …], "note": str}}}

Every figure has a table with the same numbers (the text alternative). A tenant's member sees
the tenant's own jobs by name; another tenant's job appears only as "another tenant's job" (on
the cluster map and a shared GPU's timeline) or not at all. A cluster admin (``is_staff``) sees
every job. Times are seconds unless a name says otherwise; GPU counts are GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Max, Min, Q, Sum
from django.utils import timezone

from cluster.models import GPU, Job, JobEvent, Membership, Node, Placement, Quota, Tenant
from scheduling import figures
from scheduling.core.metrics import jain_index

HIDDEN = "another tenant's job"


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking: a cluster admin (``tenant_id`` ``None``) or a member of one tenant."""

    tenant_id: int | None = None
    tenant_name: str = ""

    @property
    def is_admin(self) -> bool:
        """Whether the viewer sees the whole cluster."""
        return self.tenant_id is None

    @property
    def scope(self) -> str:
        """``cluster`` for an admin, ``tenant NAME`` for a member."""
        return "cluster" if self.is_admin else f"tenant {self.tenant_name}"

    def sees(self, tenant_id: int | None) -> bool:
        """Whether jobs of ``tenant_id`` are shown to this viewer by name."""
        return self.is_admin or tenant_id == self.tenant_id


def viewer_of(user: Any) -> Viewer | None:
    """The :class:`Viewer` for a logged-in ``user``: staff → admin, a member → their tenant;
    ``None`` for anyone else (anonymous, or a user in no tenant)."""
    if not (user and user.is_authenticated):
        return None
    if user.is_staff:
        return Viewer()
    try:
        membership = Membership.objects.select_related("tenant").get(user=user)
    except Membership.DoesNotExist:
        return None
    return Viewer(membership.tenant_id, membership.tenant.name)


def iso(moment: datetime) -> str:
    """UTC ISO 8601 with milliseconds (what Plotly's date axes parse)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _payload(
    viewer: Viewer,
    now: datetime,
    *,
    empty: str | None = None,
    summary: str = "",
    figures_: Mapping[str, Any] | None = None,
    tables: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "scope": viewer.scope,
        "generated_at": iso(now),
        "empty": empty,
        "summary": summary,
        "figures": dict(figures_ or {}),
        "tables": dict(tables or {}),
    }


def _table(columns: Sequence[str], rows: Iterable[Sequence[Any]], note: str = "") -> dict[str, Any]:
    return {"columns": list(columns), "rows": [list(r) for r in rows], "note": note}


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _job_label(job_id: int, name: str) -> str:
    return f"job {job_id} {name}"


def _visible_tenants(viewer: Viewer) -> list[str]:
    if viewer.is_admin:
        return list(Tenant.objects.order_by("name").values_list("name", flat=True))
    return [viewer.tenant_name]


# ------------------------------------------------------------------------------- rounds
def _round_model() -> Any:
    """``scheduling.models.Round``, or ``None`` while that model does not exist."""
    try:
        from scheduling.models import Round
    except ImportError:
        return None
    return Round


def latest_rounds(limit: int) -> list[Any]:
    """The ``limit`` most recent rounds, newest first (empty while there are none)."""
    model = _round_model()
    if model is None:
        return []
    return list(model.objects.order_by("-started_at", "-id")[:limit])


def _shared_slowdowns(latest: Any) -> dict[int, float]:
    """``{job id: ξ}`` for jobs the latest round started in a share (both partners)."""
    slowdowns: dict[int, float] = {}
    for decision in (latest.decisions if latest is not None else []) or []:
        for share in decision.get("shares") or ():
            slowdowns[decision["job_id"]] = share["xi_self"]
            slowdowns.setdefault(share["partner_id"], share["xi_partner"])
    return slowdowns


def _profile_slowdown(model_a: str, sub_a: int, model_b: str, sub_b: int) -> float:
    """``ξ`` of ``model_a`` at micro-batch ``sub_a`` sharing a GPU with ``model_b`` at ``sub_b``,
    from the shipped profile (measured pair, else the fitted predictor; MODEL.md §2)."""
    from scheduling.profiles import load_default_profile

    profile = load_default_profile()
    xi, _ = profile.type_slowdown(profile.job_type_for(model_a, sub_a), profile.job_type_for(model_b, sub_b))
    return xi


# ---------------------------------------------------------------------------- cluster map
def cluster_map_payload(viewer: Viewer) -> dict[str, Any]:
    """Nodes × GPUs coloured by tenant, shared GPUs marked, hover with jobs, sub-batches and
    slowdowns (the latest round's ξ for jobs it paired, else the profile's)."""
    now = timezone.now()
    gpus = list(
        GPU.objects.order_by("node__name", "index").values_list(
            "id", "node__name", "index", "healthy", "node__status"
        )
    )
    if not gpus:
        return _payload(
            viewer,
            now,
            empty="No GPUs registered yet: register a node "
            "(manage.py add_node, or start a node agent) and its GPUs appear here.",
        )
    on_gpu: dict[int, list[tuple]] = {}
    for row in (
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
    ):
        on_gpu.setdefault(row[0], []).append(row)
    rounds = latest_rounds(1)
    from_round = _shared_slowdowns(rounds[0] if rounds else None)
    cells, rows = [], []
    for gpu_id, node, index, healthy, node_status in gpus:
        placed = on_gpu.get(gpu_id, [])
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
                        "label": _job_label(job_id, name),
                        "sub_batch": sub,
                        "slowdown": _round(slowdown),
                    }
                )
            else:
                jobs.append({"tenant": None, "label": HIDDEN, "sub_batch": None, "slowdown": None})
        cells.append(
            {
                "node": node,
                "index": index,
                "healthy": healthy and node_status != Node.Status.UNHEALTHY,
                "jobs": jobs,
            }
        )
        for job in jobs:
            rows.append(
                [
                    f"{node}:{index}",
                    job["tenant"] or "another tenant",
                    job["label"],
                    job["sub_batch"],
                    job["slowdown"],
                    "yes" if len(jobs) > 1 else "no",
                ]
            )
    busy = sum(1 for c in cells if c["jobs"])
    shared = sum(1 for c in cells if len(c["jobs"]) > 1)
    healthy = sum(1 for c in cells if c["healthy"])
    nodes = len({c["node"] for c in cells})
    summary = (
        f"{nodes} nodes, {len(cells)} GPUs ({healthy} healthy): {busy} in use, {shared} shared by two "
        f"jobs, {len(cells) - busy} free."
    )
    table = _table(
        ["GPU", "tenant", "job", "sub-batch", "slowdown ξ", "shared"],
        rows,
        "" if rows else "No GPU is in use.",
    )
    return _payload(
        viewer,
        now,
        summary=summary,
        figures_={"cluster_map": figures.cluster_map_spec(cells, _visible_tenants(viewer))},
        tables={"cluster_map": table},
    )


# ------------------------------------------------------------------------------- timeline
def _window_placements(start: datetime, now: datetime) -> list[tuple]:
    """Placements that held a GPU during ``[start, now]``: ``(gpu label, slot, job id, job name,
    tenant id, tenant name, begin, end)`` with ``end`` ``now`` for active ones."""
    rows = (
        Placement.objects.filter(created_at__lt=now)
        .filter(Q(ended_at__isnull=True, active=True) | Q(ended_at__gt=start))
        .values_list(
            "gpu__node__name",
            "gpu__index",
            "slot",
            "job_id",
            "job__name",
            "job__tenant_id",
            "job__tenant__name",
            "created_at",
            "ended_at",
        )
    )
    return [
        (f"{node}:{index}", slot, job_id, name, tenant_id, tenant, max(begin, start), min(end or now, now))
        for node, index, slot, job_id, name, tenant_id, tenant, begin, end in rows
    ]


def _shared_intervals(placements: Sequence[tuple]) -> list[tuple[str, datetime, datetime]]:
    """Intervals during which a GPU held two placements: ``(gpu label, start, end)``."""
    by_gpu: dict[str, list[tuple[datetime, int]]] = {}
    for gpu, *_, begin, end in placements:
        if end > begin:
            by_gpu.setdefault(gpu, []).extend(((begin, 1), (end, -1)))
    shared = []
    for gpu, events in by_gpu.items():
        events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
        held, since = 0, None
        for moment, change in events:
            held += change
            if held >= 2 and since is None:
                since = moment
            elif held < 2 and since is not None:
                if moment > since:
                    shared.append((gpu, since, moment))
                since = None
    return shared


def _zoom(placements: Sequence[tuple], start: datetime, now: datetime) -> tuple[str, str]:
    """The timeline's x range: from just before the earliest bar (not the window's start, so a
    young cluster's bars are not slivers at the right edge; at least 1 min) to now."""
    first = min(p[6] for p in placements)
    span = max((now - first).total_seconds() * 1.05, 60.0)
    return iso(max(start, now - timedelta(seconds=span))), iso(now)


def timeline_payload(viewer: Viewer, window_s: int) -> dict[str, Any]:
    """Gantt of jobs on GPUs over the last ``window_s`` seconds, shared intervals hatched.

    A tenant's member sees the GPUs their jobs used, with any co-located job of another tenant
    drawn anonymously (it explains the slowdown). At most 2,000 bars, newest first.
    """
    now = timezone.now()
    start = now - timedelta(seconds=window_s)
    placements = _window_placements(start, now)
    if not viewer.is_admin:
        own_gpus = {p[0] for p in placements if p[4] == viewer.tenant_id}
        placements = [p for p in placements if p[0] in own_gpus]
    placements.sort(key=lambda p: p[6], reverse=True)
    dropped = max(0, len(placements) - 2000)
    placements = placements[:2000]
    minutes = f"{window_s / 60:g} min"
    if not placements:
        return _payload(viewer, now, empty=f"No job held a GPU in the last {minutes}.")
    bars, rows = [], []
    for gpu, slot, job_id, name, tenant_id, tenant, begin, end in placements:
        visible = viewer.sees(tenant_id)
        label = _job_label(job_id, name) if visible else HIDDEN
        bars.append(
            {
                "gpu": gpu,
                "slot": slot,
                "tenant": tenant if visible else None,
                "label": label,
                "start": iso(begin),
                "end": iso(end),
                "duration_ms": (end - begin).total_seconds() * 1000,
            }
        )
        rows.append(
            [
                gpu,
                label,
                tenant if visible else "another tenant",
                iso(begin),
                iso(end),
                round((end - begin).total_seconds()),
            ]
        )
    shared = [
        {"gpu": g, "start": iso(a), "end": iso(b), "duration_ms": (b - a).total_seconds() * 1000}
        for g, a, b in _shared_intervals(placements)
    ]
    shared_s = sum(s["duration_ms"] for s in shared) / 1000
    summary = (
        f"{len(bars)} placements on {len({b['gpu'] for b in bars})} GPUs in the last {minutes}; "
        f"{len(shared)} shared interval{'' if len(shared) == 1 else 's'} "
        f"({shared_s / 60:.1f} GPU-min shared)."
    )
    note = f"{dropped} older placements not drawn." if dropped else ""
    return _payload(
        viewer,
        now,
        summary=summary,
        figures_={"timeline": figures.timeline_spec(bars, shared, _zoom(placements, start, now))},
        tables={"timeline": _table(["GPU", "job", "tenant", "start", "end", "seconds"], rows, note)},
    )


# ------------------------------------------------------------------------------ decisions
WAITS_PER_ROUND = 20


def decisions_payload(viewer: Viewer, n_rounds: int) -> dict[str, Any]:
    """The last ``n_rounds`` rounds' decisions: who was paired with whom and why (predicted
    T_seq vs T_con, ξ of both, sub-batch), what started alone, what was preempted, and why jobs
    wait (the first :data:`WAITS_PER_ROUND` per round; the queue lists them all)."""
    now = timezone.now()
    recent = latest_rounds(max(n_rounds, 30))
    if not recent:
        return _payload(viewer, now, empty="No scheduling round has run yet.")
    shown = recent[:n_rounds]
    ids = {d["job_id"] for r in shown for d in r.decisions or ()}
    ids |= {s["partner_id"] for r in shown for d in r.decisions or () for s in d.get("shares") or ()}
    jobs = {
        j: (name, tenant_id, tenant)
        for j, name, tenant_id, tenant in Job.objects.filter(id__in=ids).values_list(
            "id", "name", "tenant_id", "tenant__name"
        )
    }

    def label(job_id: int) -> tuple[str, str, bool]:
        name, tenant_id, tenant = jobs.get(job_id, ("(deleted)", None, ""))
        if viewer.sees(tenant_id):
            return _job_label(job_id, name), tenant, True
        return HIDDEN, "another tenant", False

    rows, pairs = [], []
    for r in shown:
        when = iso(r.started_at)
        waits = 0
        for d in r.decisions or ():
            job, tenant, visible = label(d["job_id"])
            if not visible:
                continue
            if d["action"] == "wait":
                waits += 1
                if waits > WAITS_PER_ROUND:
                    continue
            shares = d.get("shares") or [None]
            for share in shares:
                partner = label(share["partner_id"])[0] if share else ""
                rows.append(
                    [
                        when,
                        r.policy,
                        d["action"],
                        job,
                        tenant,
                        ", ".join(d.get("gpus") or ()),
                        d.get("sub_batch"),
                        d.get("accum_steps"),
                        partner,
                        _round(share["xi_self"]) if share else None,
                        _round(share["xi_partner"]) if share else None,
                        _round(share["t_seq_s"], 1) if share else None,
                        _round(share["t_con_s"], 1) if share else None,
                        d.get("reason", ""),
                    ]
                )
                if share:
                    pairs.append(
                        {
                            "label": f"{job} + {partner} ({when[11:19]})",
                            "t_seq_s": share["t_seq_s"],
                            "t_con_s": share["t_con_s"],
                            "xi_self": share["xi_self"],
                            "xi_partner": share["xi_partner"],
                            "sub_batch": d.get("sub_batch"),
                        }
                    )
        if waits > WAITS_PER_ROUND:
            rows.append(
                [
                    when,
                    r.policy,
                    "wait",
                    f"… and {waits - WAITS_PER_ROUND} more waiting jobs",
                    "",
                    "",
                    None,
                    None,
                    "",
                    None,
                    None,
                    None,
                    None,
                    "see the queue",
                ]
            )
    counts = [
        {
            "started_at": iso(r.started_at),
            "n_started": r.n_started,
            "n_waiting": r.n_waiting,
            "n_preempted": r.n_preempted,
        }
        for r in reversed(recent)
    ]
    latest = recent[0]
    summary = (
        f"Latest round {iso(latest.started_at)} ({latest.policy}, {latest.duration_ms:.0f} ms): "
        f"{latest.n_started} started, {latest.n_waiting} waiting, {latest.n_preempted} preempted; "
        f"{len(pairs)} sharing decisions in the last {len(shown)} rounds."
    )
    columns = [
        "round",
        "policy",
        "action",
        "job",
        "tenant",
        "GPUs",
        "sub-batch",
        "accum steps",
        "shares with",
        "ξ self",
        "ξ partner",
        "T_seq s",
        "T_con s",
        "reason",
    ]
    count_rows = [[c["started_at"], c["n_started"], c["n_waiting"], c["n_preempted"]] for c in counts]
    return _payload(
        viewer,
        now,
        summary=summary,
        figures_={
            "pairs": figures.pair_decisions_spec(pairs),
            "round_counts": figures.round_counts_spec(counts),
        },
        tables={
            "decisions": _table(
                columns, rows, "" if rows else "No decision about your jobs in these rounds."
            ),
            "round_counts": _table(["round", "started", "waiting", "preempted"], count_rows),
        },
    )


# ------------------------------------------------------------------------------- fairness
FAIRNESS_BINS = 30


def _usage_bins(
    placements: Sequence[tuple], start: datetime, width_s: float, bins: int
) -> dict[int, list[float]]:
    """``{tenant id: [GPU-seconds per bin]}``; a GPU held by two jobs charges each half
    (TESTING.md invariant 7: a shared GPU-second is never counted twice)."""
    by_gpu: dict[str, list[tuple]] = {}
    for p in placements:
        by_gpu.setdefault(p[0], []).append(p)
    charged: dict[int, list[float]] = {}
    for held in by_gpu.values():
        cuts = sorted({m for p in held for m in (p[6], p[7])})
        for lo, hi in zip(cuts, cuts[1:], strict=False):
            active = [p[4] for p in held if p[6] <= lo and p[7] >= hi]
            for tenant_id in active:
                _spread(
                    charged.setdefault(tenant_id, [0.0] * bins),
                    (lo - start).total_seconds(),
                    (hi - start).total_seconds(),
                    1.0 / len(active),
                    width_s,
                )
    return charged


def _spread(acc: list[float], a: float, b: float, weight: float, width_s: float) -> None:
    """Add ``weight × overlap`` of ``[a, b]`` (s from the window start) to each bin of ``acc``."""
    first = max(0, int(a // width_s))
    for k in range(first, min(len(acc), int(b // width_s) + 1)):
        overlap = min(b, (k + 1) * width_s) - max(a, k * width_s)
        if overlap > 0:
            acc[k] += weight * overlap


def _demand_bins(start: datetime, now: datetime, width_s: float, bins: int) -> dict[int, list[bool]]:
    """``{tenant id: [had a pending or running job during bin k]}``."""
    demand: dict[int, list[bool]] = {}

    def mark(tenant_id: int, a: datetime, b: datetime) -> None:
        flags = demand.setdefault(tenant_id, [False] * bins)
        lo = max(0, int((a - start).total_seconds() // width_s))
        hi = min(bins - 1, int((b - start).total_seconds() // width_s))
        for k in range(lo, hi + 1):
            flags[k] = True

    for tenant_id, first in (
        Job.objects.filter(finished_at__isnull=True, status__in=Job.ACTIVE_STATUSES)
        .values_list("tenant_id")
        .annotate(first=Min("submitted_at"))
    ):
        mark(tenant_id, max(first, start), now)
    for tenant_id, submitted, finished in Job.objects.filter(
        finished_at__gt=start, submitted_at__lt=now
    ).values_list("tenant_id", "submitted_at", "finished_at"):
        mark(tenant_id, max(submitted, start), finished)
    return demand


def fairness_payload(viewer: Viewer, window_s: int) -> dict[str, Any]:
    """Per tenant over the last ``window_s`` s: GPUs in use vs quota (stacked), Jain's index over
    time, mean JCT and queueing delay, GPU-hours.

    Jain's index (Jain, Chiu & Hawe 1984) of bin k is taken over the tenants with a guaranteed
    quota that had work (a pending or running job) in that bin, of ``x_t = GPUs in use ÷
    guaranteed GPUs``: 1 when every such tenant gets the same multiple of its quota. It is the
    same for every viewer (a cluster-wide figure that names no job). Mean JCT (submit → finish)
    is over the tenant's succeeded jobs; mean queueing delay (submit → first start) over its
    started jobs; GPU-hours over the window, a shared GPU-hour charging each job half.
    """
    now = timezone.now()
    start = now - timedelta(seconds=window_s)
    tenants = dict(Tenant.objects.values_list("id", "name"))
    if not tenants:
        return _payload(viewer, now, empty="No tenants yet: create one with manage.py create_tenant.")
    quotas = {t: q or 0 for t, q in Quota.objects.values_list("tenant_id").annotate(q=Sum("guaranteed_gpus"))}
    width_s = window_s / FAIRNESS_BINS
    charged = _usage_bins(_window_placements(start, now), start, width_s, FAIRNESS_BINS)
    demand = _demand_bins(start, now, width_s, FAIRNESS_BINS)
    jain: list[float | None] = []
    for k in range(FAIRNESS_BINS):
        xs = [
            charged.get(t, [0.0] * FAIRNESS_BINS)[k] / width_s / quotas[t]
            for t in tenants
            if quotas.get(t, 0) > 0 and demand.get(t, [False] * FAIRNESS_BINS)[k]
        ]
        jain.append(_round(jain_index(xs), 3) if xs else None)

    visible = {t: n for t, n in tenants.items() if viewer.sees(t)}
    jct = ExpressionWrapper(F("finished_at") - F("submitted_at"), output_field=DurationField())
    queued = ExpressionWrapper(F("started_at") - F("submitted_at"), output_field=DurationField())
    stats: dict[int, dict[str, Any]] = {t: {} for t in visible}
    scoped = Job.objects.filter(tenant_id__in=list(visible))
    for t, n, avg in (
        scoped.filter(status=Job.Status.SUCCEEDED, finished_at__isnull=False)
        .values_list("tenant_id")
        .annotate(n=Count("id"), avg=Avg(jct))
    ):
        stats[t].update(finished=n, avg_jct_s=_seconds(avg))
    for t, avg in scoped.filter(started_at__isnull=False).values_list("tenant_id").annotate(avg=Avg(queued)):
        stats[t]["avg_queue_s"] = _seconds(avg)
    for t, n in scoped.filter(status=Job.Status.PENDING).values_list("tenant_id").annotate(n=Count("id")):
        stats[t]["pending"] = n
    in_use_now = dict(
        scoped.filter(status=Job.Status.RUNNING).values_list("tenant_id").annotate(n=Sum("gpus"))
    )

    times = [iso(start + timedelta(seconds=k * width_s)) for k in range(FAIRNESS_BINS)]
    usage = {
        visible[t]: [round(s / width_s, 3) for s in charged.get(t, [0.0] * FAIRNESS_BINS)] for t in visible
    }
    per_tenant: dict[str, dict[str, float | None]] = {}
    rows = []
    for t, name in sorted(visible.items(), key=lambda kv: kv[1]):
        s = stats[t]
        gpu_hours = sum(charged.get(t, ())) / 3600.0
        per_tenant[name] = {
            "avg_jct_s": s.get("avg_jct_s"),
            "avg_queue_s": s.get("avg_queue_s"),
            "gpu_hours": gpu_hours,
        }
        rows.append(
            [
                name,
                quotas.get(t, 0),
                in_use_now.get(t, 0),
                round(gpu_hours, 3),
                s.get("finished", 0),
                s.get("pending", 0),
                _round(s.get("avg_jct_s"), 1),
                _round(s.get("avg_queue_s"), 1),
            ]
        )
    live = {"live": per_tenant}
    minutes = f"{window_s / 60:g} min"
    current = next((j for j in reversed(jain) if j is not None), None)
    summary = (
        f"Jain's index now: {current if current is not None else 'n/a (no tenant with work and quota)'}; "
        f"GPU-hours over the last {minutes}."
    )
    return _payload(
        viewer,
        now,
        summary=summary,
        figures_={
            "usage": figures.tenant_usage_spec(times, usage, {visible[t]: quotas.get(t, 0) for t in visible}),
            "jain": figures.jain_spec(times, jain),
            "jct": figures.tenant_bars_spec(
                live, "avg_jct_s", 1 / 60.0, "Mean JCT per tenant", "mean JCT (min)"
            ),
            "queueing": figures.tenant_bars_spec(
                live, "avg_queue_s", 1 / 60.0, "Mean queueing delay per tenant", "mean queueing delay (min)"
            ),
            "gpu_hours": figures.tenant_bars_spec(
                live, "gpu_hours", 1.0, f"GPU-hours per tenant (last {minutes})", "GPU-hours"
            ),
        },
        tables={
            "tenants": _table(
                [
                    "tenant",
                    "quota GPUs",
                    "GPUs in use",
                    f"GPU-hours ({minutes})",
                    "succeeded jobs",
                    "pending jobs",
                    "mean JCT s",
                    "mean queueing delay s",
                ],
                rows,
            ),
            "usage": _table(
                ["bin start", *usage, "Jain's index"],
                ([times[k], *(usage[n][k] for n in usage), jain[k]] for k in range(FAIRNESS_BINS)),
            ),
        },
    )


def _seconds(value: timedelta | float | None) -> float | None:
    """A duration aggregate as seconds (backends return a ``timedelta`` or microseconds)."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value) / 1e6


# ---------------------------------------------------------------------------------- queue
def policy_order(pending: Sequence[tuple[int, datetime]], latest: Any) -> list[int]:
    """Pending job ids in the order the policy considers them.

    ``pending``: ``(job id, submitted_at)``. The latest round lists its ``wait`` decisions in the
    policy's own order (``scheduling.core.placement`` appends them as it walks the sorted queue),
    so those come first in that order; jobs submitted since (or requeued) follow by arrival,
    ties by id, as every policy breaks ties (``scheduling.core.policies``).
    """
    waiting = {job_id for job_id, _ in pending}
    ranked = []
    seen: set[int] = set()
    for d in (latest.decisions if latest is not None else None) or ():
        if d["action"] == "wait" and d["job_id"] in waiting and d["job_id"] not in seen:
            ranked.append(d["job_id"])
            seen.add(d["job_id"])
    ranked.extend(
        job_id for job_id, _ in sorted((p for p in pending if p[0] not in seen), key=lambda p: (p[1], p[0]))
    )
    return ranked


def queue_payload(viewer: Viewer, limit: int) -> dict[str, Any]:
    """Waiting jobs in policy order (position among all waiting jobs), how long each has waited
    (since submission or its last preemption/requeue), and the latest round's reason."""
    now = timezone.now()
    pending = list(
        Job.objects.filter(status=Job.Status.PENDING).values_list("id", "submitted_at", "tenant_id")
    )
    if not viewer.is_admin:
        own = {job_id for job_id, _, tenant_id in pending if tenant_id == viewer.tenant_id}
    rounds = latest_rounds(1)
    latest = rounds[0] if rounds else None
    order = policy_order([(j, s) for j, s, _ in pending], latest)
    positions = [(i + 1, j) for i, j in enumerate(order) if viewer.is_admin or j in own]
    total = len(positions)
    if not total:
        return _payload(viewer, now, empty="No job is waiting.")
    shown = positions[:limit]
    ids = [j for _, j in shown]
    details = {
        j: rest
        for j, *rest in Job.objects.filter(id__in=ids).values_list(
            "id", "name", "tenant__name", "gpus", "submitted_at"
        )
    }
    requeued = dict(
        JobEvent.objects.filter(job_id__in=ids, kind__in=[JobEvent.Kind.PREEMPTED, JobEvent.Kind.REQUEUED])
        .values_list("job_id")
        .annotate(last=Max("at"))
    )
    reasons = {
        d["job_id"]: d.get("reason", "")
        for d in (latest.decisions if latest else None) or ()
        if d["action"] == "wait"
    }
    jobs, rows = [], []
    for position, job_id in shown:
        name, tenant, gpus, submitted = details[job_id]
        since = max(submitted, requeued.get(job_id, submitted))
        wait_s = max(0.0, (now - since).total_seconds())
        label = _job_label(job_id, name)
        jobs.append({"label": label, "tenant": tenant, "wait_s": wait_s, "gpus": gpus, "position": position})
        rows.append([position, label, tenant, gpus, round(wait_s), reasons.get(job_id, "not yet considered")])
    note = f"First {len(shown)} of {total} shown." if total > len(shown) else ""
    summary = f"{total} waiting job{'s' if total != 1 else ''}" + (
        f" (policy order from the round of {iso(latest.started_at)}, {latest.policy})."
        if latest
        else " (arrival order: no round has run yet)."
    )
    return _payload(
        viewer,
        now,
        summary=summary,
        figures_={"queue": figures.queue_spec(jobs)},
        tables={"queue": _table(["position", "job", "tenant", "GPUs", "waiting s", "reason"], rows, note)},
    )
