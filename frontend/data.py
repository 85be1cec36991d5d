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
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from django.db import connection
from django.db.models import Avg, Count, Max, Min, Q, Sum, Value
from django.utils import timezone

from cluster.expressions import BinIndex, EpochSeconds
from cluster.models import GPU, Job, JobEvent, Membership, Node, Placement, Quota, Tenant
from scheduling import figures
from scheduling.core.metrics import jain_index
from scheduling.models import Round
from scheduling.service import policy_named, scheduler_config, summed_quotas

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


@dataclass(frozen=True, slots=True)
class RoundView:
    """A recorded round, pre-digested for the dashboard (decisions are parsed once per process).

    ``acts``: its ``start`` and ``preempt`` decisions (the dicts of ``Round.decisions``), in
    order; ``waits``: ``(job id, reason)`` of its ``wait`` decisions in the policy's order;
    ``slowdowns``: ``{job id: ξ}`` of both partners of every share it started.
    """

    pk: int
    started_at: datetime
    policy: str
    duration_ms: float
    n_started: int
    n_waiting: int
    n_preempted: int
    acts: tuple[dict[str, Any], ...]
    waits: tuple[tuple[int, str], ...]
    slowdowns: dict[int, float]

    @classmethod
    def of(cls, meta: Sequence[Any], decisions: Sequence[Mapping[str, Any]] | None) -> RoundView:
        """From ``(pk, started_at, policy, duration_ms, n_started, n_waiting, n_preempted)`` and
        the round's ``decisions`` list (see ``scheduling.models.Round``)."""
        acts, waits, slowdowns = [], [], {}
        for d in decisions or ():
            if d["action"] == "wait":
                waits.append((d["job_id"], d.get("reason", "")))
                continue
            acts.append(dict(d))
            for share in d.get("shares") or ():
                slowdowns[d["job_id"]] = share["xi_self"]
                slowdowns.setdefault(share["partner_id"], share["xi_partner"])
        return cls(*meta, tuple(acts), tuple(waits), slowdowns)


_ROUND_FIELDS = ("id", "started_at", "policy", "duration_ms", "n_started", "n_waiting", "n_preempted")
_round_cache: OrderedDict[tuple[int, datetime], RoundView] = OrderedDict()
_round_cache_lock = threading.Lock()
ROUND_CACHE_SIZE = 64


def round_summaries(limit: int) -> list[tuple]:
    """``(pk, started_at, policy, duration_ms, n_started, n_waiting, n_preempted)`` of the
    ``limit`` most recent rounds, newest first (empty while there are none)."""
    return list(Round.objects.order_by("-started_at", "-id").values_list(*_ROUND_FIELDS)[:limit])


def latest_rounds(limit: int) -> list[RoundView]:
    """The ``limit`` most recent rounds as :class:`RoundView`, newest first.

    A round's decisions never change once written (``scheduling.services`` stores them with the
    row), so each is read and parsed once per process and kept in a small LRU cache keyed by
    ``(pk, started_at)``; a poll then costs one small query.
    """
    metas = round_summaries(limit)
    views: dict[int, RoundView] = {}
    with _round_cache_lock:
        for meta in metas:
            cached = _round_cache.get((meta[0], meta[1]))
            if cached is not None:
                _round_cache.move_to_end((meta[0], meta[1]))
                views[meta[0]] = cached
    missing = [m for m in metas if m[0] not in views]
    if missing:
        decisions = dict(Round.objects.filter(pk__in=[m[0] for m in missing]).values_list("id", "decisions"))
        with _round_cache_lock:
            for meta in missing:
                view = views[meta[0]] = RoundView.of(meta, decisions.get(meta[0]))
                _round_cache[(meta[0], meta[1])] = view
            while len(_round_cache) > ROUND_CACHE_SIZE:
                _round_cache.popitem(last=False)
    return [views[m[0]] for m in metas]


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
    gpus = _raw_rows(
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
    for row in _raw_rows(
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
    from_round = rounds[0].slowdowns if rounds else {}
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
                "healthy": bool(healthy) and node_status != Node.Status.UNHEALTHY,
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
def _raw_rows(queryset: Any) -> list[tuple]:
    """The rows of a ``values_list`` queryset without Django's per-row conversion (ints, floats,
    strings; booleans as 0/1 on SQLite). Annotations must come last in ``values_list``: that is
    their place in the SQL."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


@lru_cache(maxsize=8192)
def _at(epoch_s: float) -> str:
    """ISO 8601 UTC of seconds since the epoch, to the millisecond (what Plotly's date axes
    parse); ``time.strftime`` is several times cheaper than ``datetime.isoformat`` here, and a
    round places all its jobs at one instant, so most values repeat (memoised)."""
    ms = round(epoch_s * 1000)
    whole, frac = divmod(ms, 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(whole))}.{frac:03d}Z"


def _in_window(start: datetime, now: datetime) -> Any:
    """Placements that held a GPU at some time in ``[start, now]``."""
    return Placement.objects.filter(created_at__lt=now).filter(
        Q(ended_at__isnull=True, active=True) | Q(ended_at__gt=start)
    )


def _window_placements(start: datetime, now: datetime, tenant_id: int | None = None) -> list[tuple]:
    """Placements that held a GPU during ``[start, now]``: ``(gpu label, slot, job id, job name,
    tenant id, tenant name, begin, end)``, times in seconds since the epoch clipped to the
    window (``end`` is now for an active placement). With ``tenant_id``: only on GPUs that a
    job of that tenant held in the window (with the other jobs on those GPUs)."""
    placements = _in_window(start, now)
    if tenant_id is not None:
        placements = placements.filter(
            gpu_id__in=_in_window(start, now).filter(job__tenant_id=tenant_id).values("gpu_id")
        )
    rows = _raw_rows(
        placements.annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at")).values_list(
            "gpu__node__name",
            "gpu__index",
            "slot",
            "job_id",
            "job__name",
            "job__tenant_id",
            "job__tenant__name",
            "begin_s",
            "end_s",
        )
    )
    lo, hi = start.timestamp(), now.timestamp()
    return [
        (
            f"{node}:{index}",
            slot,
            job_id,
            name,
            tenant,
            tenant_name,
            max(begin, lo),
            hi if end is None else min(end, hi),
        )
        for node, index, slot, job_id, name, tenant, tenant_name, begin, end in rows
    ]


def _window_usage(start: datetime, now: datetime) -> list[tuple[int, int, float, float]]:
    """``(GPU id, tenant id, begin, end)`` of the placements of ``[start, now]`` (clipped, s)."""
    rows = _raw_rows(
        _in_window(start, now)
        .annotate(begin_s=EpochSeconds("created_at"), end_s=EpochSeconds("ended_at"))
        .values_list("gpu_id", "job__tenant_id", "begin_s", "end_s")
    )
    lo, hi = start.timestamp(), now.timestamp()
    return [
        (gpu, tenant, max(begin, lo), hi if end is None else min(end, hi)) for gpu, tenant, begin, end in rows
    ]


def _shared_intervals(placements: Sequence[tuple]) -> list[tuple[str, float, float]]:
    """Intervals during which a GPU held two placements: ``(gpu label, start, end)`` (s)."""
    by_gpu: dict[str, list[tuple[float, int]]] = {}
    for gpu, *_, begin, end in placements:
        if end > begin:
            by_gpu.setdefault(gpu, []).extend(((begin, 1), (end, -1)))
    shared = []
    for gpu, events in by_gpu.items():
        if len(events) < 4:
            continue
        events.sort()  # at the same instant an end (-1) sorts before a start (+1)
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
    span = max((now.timestamp() - first) * 1.05, 60.0)
    return iso(max(start, now - timedelta(seconds=span))), iso(now)


MAX_BARS = 2000
MAX_TABLE_ROWS = 500


def timeline_payload(viewer: Viewer, window_s: int) -> dict[str, Any]:
    """Gantt of jobs on GPUs over the last ``window_s`` seconds, shared intervals hatched.

    A tenant's member sees the GPUs their jobs used, with any co-located job of another tenant
    drawn anonymously (it explains the slowdown). At most :data:`MAX_BARS` bars: running
    placements first, then by latest end; the table lists the first :data:`MAX_TABLE_ROWS`.
    """
    now = timezone.now()
    start = now - timedelta(seconds=window_s)
    placements = _window_placements(start, now, viewer.tenant_id)
    placements.sort(key=lambda p: (p[7], p[6]), reverse=True)  # end = now for running ones
    dropped = max(0, len(placements) - MAX_BARS)
    placements = placements[:MAX_BARS]
    minutes = f"{window_s / 60:g} min"
    if not placements:
        return _payload(viewer, now, empty=f"No job held a GPU in the last {minutes}.")
    bars, rows = [], []
    for gpu, slot, job_id, name, tenant_id, tenant, begin, end in placements:
        visible = viewer.sees(tenant_id)
        label = _job_label(job_id, name) if visible else HIDDEN
        begin_at, end_at = _at(begin), _at(end)
        bars.append(
            {
                "gpu": gpu,
                "slot": slot,
                "tenant": tenant if visible else None,
                "label": label,
                "start": begin_at,
                "end": end_at,
                "duration_ms": round((end - begin) * 1000),
            }
        )
        if len(rows) < MAX_TABLE_ROWS:
            rows.append(
                [gpu, label, tenant if visible else "another tenant", begin_at, end_at, round(end - begin)]
            )
    shared = [
        {"gpu": g, "start": _at(a), "end": _at(b), "duration_ms": round((b - a) * 1000)}
        for g, a, b in _shared_intervals(placements)
    ]
    shared_s = sum(s["duration_ms"] for s in shared) / 1000
    summary = (
        f"{len(bars)} placements on {len({b['gpu'] for b in bars})} GPUs in the last {minutes}; "
        f"{len(shared)} shared interval{'' if len(shared) == 1 else 's'} "
        f"({shared_s / 60:.1f} GPU-min shared)."
    )
    notes = [
        f"{dropped} placements that ended earlier not drawn." if dropped else "",
        f"First {len(rows)} of {len(bars)} listed (running first)." if len(rows) < len(bars) else "",
    ]
    return _payload(
        viewer,
        now,
        summary=summary,
        figures_={"timeline": figures.timeline_spec(bars, shared, _zoom(placements, start, now))},
        tables={
            "timeline": _table(
                ["GPU", "job", "tenant", "start", "end", "seconds"], rows, " ".join(n for n in notes if n)
            )
        },
    )


# ------------------------------------------------------------------------------ decisions
WAITS_PER_ROUND = 20
DECISION_COLUMNS = (
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
)


_JOB_REF = re.compile(r"\bjob (\d+)\b")
_TENANT_REF = re.compile(r"\btenant ([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)")


class _JobNames:
    """Job id → (name, tenant id, tenant name), looked up in batches and remembered."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[str, int | None, str]] = {}

    def load(self, ids: Iterable[int]) -> None:
        wanted = [j for j in set(ids) if j not in self.known]
        for i in range(0, len(wanted), 500):
            for j, name, tenant_id, tenant in Job.objects.filter(id__in=wanted[i : i + 500]).values_list(
                "id", "name", "tenant_id", "tenant__name"
            ):
                self.known[j] = (name, tenant_id, tenant)

    def redact(self, texts: Sequence[str], viewer: Viewer) -> list[str]:
        """``texts`` (the policy's reasons) with every job of another tenant named "another
        tenant's job" and every other tenant "another tenant"; unchanged for an admin.

        Reasons cite jobs by id ("waits behind job 12", "job 26 on GPUs 13,14") and tenants by
        name ("tenant team-a's guarantee").
        """
        if viewer.is_admin:
            return list(texts)
        self.load(int(m) for text in texts for m in _JOB_REF.findall(text))

        def job(match: re.Match[str]) -> str:
            return match.group(0) if self.label(int(match.group(1)), viewer)[2] else HIDDEN

        def tenant(match: re.Match[str]) -> str:
            return match.group(0) if match.group(1) == viewer.tenant_name else "another tenant"

        return [_TENANT_REF.sub(tenant, _JOB_REF.sub(job, text)) for text in texts]

    def label(self, job_id: int, viewer: Viewer) -> tuple[str, str, bool]:
        """``(label, tenant, visible)`` of a job as ``viewer`` may see it."""
        name, tenant_id, tenant = self.known.get(job_id, ("(deleted)", None, ""))
        if viewer.sees(tenant_id):
            return _job_label(job_id, name), tenant, True
        return HIDDEN, "another tenant", False


def _visible_waits(
    view: RoundView, own: set[int] | None, names: _JobNames, k: int
) -> tuple[list[tuple[int, str]], int]:
    """The first ``k`` of the round's waits among ``own`` job ids (``None``: all, for an admin),
    and how many there are in all."""
    mine = list(view.waits) if own is None else [w for w in view.waits if w[0] in own]
    names.load(j for j, _ in mine[:k])
    return mine[:k], len(mine)


def decisions_payload(viewer: Viewer, n_rounds: int) -> dict[str, Any]:
    """The last ``n_rounds`` rounds' decisions: who was paired with whom and why (predicted
    T_seq vs T_con, ξ of both, sub-batch), what started alone, what was preempted, and why jobs
    wait (the first :data:`WAITS_PER_ROUND` per round; the queue lists them all).
    A member sees the decisions about the tenant's jobs; a partner of another tenant is shown
    as "another tenant's job" with its ξ (the slowdown it causes is the member's business)."""
    now = timezone.now()
    counts = round_summaries(30)
    if not counts:
        return _payload(viewer, now, empty="No scheduling round has run yet.")
    shown = latest_rounds(n_rounds)
    names = _JobNames()
    own = None
    if not viewer.is_admin and shown:  # the tenant's jobs that may appear in these rounds
        alive = Q(finished_at__isnull=True) | Q(finished_at__gte=shown[-1].started_at)
        own = {
            j
            for (j,) in _raw_rows(
                Job.objects.filter(alive, tenant_id=viewer.tenant_id).order_by().values_list("id")
            )
        }
    names.load(
        j
        for r in shown
        for d in r.acts
        for j in (d["job_id"], *(s["partner_id"] for s in d.get("shares") or ()))
    )
    rows: list[list[Any]] = []
    pairs = []
    for r in shown:
        when = iso(r.started_at)
        for d in r.acts:
            job, tenant, visible = names.label(d["job_id"], viewer)
            if not visible:
                continue
            gpus = ", ".join(d.get("gpus") or ())
            for share in d.get("shares") or [None]:
                partner = names.label(share["partner_id"], viewer)[0] if share else ""
                rows.append(
                    [
                        when,
                        r.policy,
                        d["action"],
                        job,
                        tenant,
                        gpus,
                        d.get("sub_batch"),
                        d.get("accum_steps"),
                        partner,
                        *_share_cells(share),
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
        waits, n_waits = _visible_waits(r, own, names, WAITS_PER_ROUND)
        for job_id, reason in waits:
            job, tenant, _ = names.label(job_id, viewer)
            rows.append(
                [when, r.policy, "wait", job, tenant, "", None, None, "", None, None, None, None, reason]
            )
        if n_waits > len(waits):
            rows.append(
                [
                    when,
                    r.policy,
                    "wait",
                    f"… and {n_waits - len(waits)} more waiting jobs",
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
    for row, text in zip(rows, names.redact([row[-1] for row in rows], viewer), strict=True):
        row[-1] = text
    series = [
        {"started_at": iso(c[1]), "n_started": c[4], "n_waiting": c[5], "n_preempted": c[6]}
        for c in reversed(counts)
    ]
    _, started_at, policy, duration_ms, n_started, n_waiting, n_preempted = counts[0]
    summary = (
        f"Latest round {iso(started_at)} ({policy}, {duration_ms:.0f} ms): {n_started} started, "
        f"{n_waiting} waiting, {n_preempted} preempted; {len(pairs)} sharing decisions in the last "
        f"{len(shown)} rounds."
    )
    count_rows = [[c["started_at"], c["n_started"], c["n_waiting"], c["n_preempted"]] for c in series]
    return _payload(
        viewer,
        now,
        summary=summary,
        figures_={
            **({"pairs": figures.pair_decisions_spec(pairs)} if pairs else {}),
            "round_counts": figures.round_counts_spec(series),
        },
        tables={
            "decisions": _table(DECISION_COLUMNS, rows, "" if rows else "No decision about your jobs."),
            "round_counts": _table(["round", "started", "waiting", "preempted"], count_rows),
        },
    )


def _share_cells(share: Mapping[str, Any] | None) -> list[float | None]:
    if share is None:
        return [None, None, None, None]
    return [
        _round(share["xi_self"]),
        _round(share["xi_partner"]),
        _round(share["t_seq_s"], 1),
        _round(share["t_con_s"], 1),
    ]


# ------------------------------------------------------------------------------- fairness
FAIRNESS_BINS = 30


class _Bins:
    """Per-key sums of ``weight × overlap`` of intervals with equal bins, in O(1) per interval:
    the partial first and last bins directly, the full bins between as a difference array."""

    def __init__(self, start_s: float, width_s: float, bins: int) -> None:
        self.start_s, self.width_s, self.bins = start_s, width_s, bins
        self.partial: dict[int, list[float]] = {}
        self.full: dict[int, list[float]] = {}

    def add(self, key: int, a: float, b: float, weight: float) -> None:
        """Add ``weight × |[a, b] ∩ bin k|`` to bin k of ``key`` (``a``, ``b``: epoch s)."""
        width, n = self.width_s, self.bins
        a, b = max(a - self.start_s, 0.0), min(b - self.start_s, n * width)
        if b <= a:
            return
        partial = self.partial.setdefault(key, [0.0] * n)
        first, last = min(int(a // width), n - 1), min(int(b // width), n - 1)
        if first == last:
            partial[first] += weight * (b - a)
            return
        partial[first] += weight * ((first + 1) * width - a)
        partial[last] += weight * (b - last * width)
        if last > first + 1:
            full = self.full.setdefault(key, [0.0] * (n + 1))
            full[first + 1] += weight
            full[last] -= weight

    def totals(self) -> dict[int, list[float]]:
        """``{key: [sum per bin]}``."""
        result = {}
        for key, partial in self.partial.items():
            full, level, sums = self.full.get(key, ()), 0.0, []
            for k, value in enumerate(partial):
                level += full[k] if full else 0.0
                sums.append(value + level * self.width_s)
            result[key] = sums
        return result


def _usage_bins(
    placements: Sequence[tuple], start_s: float, width_s: float, bins: int
) -> dict[int, list[float]]:
    """``{tenant id: [GPU-seconds per bin]}`` of ``placements`` (``(GPU id, tenant id, begin,
    end)`` as from :func:`_window_usage`); a GPU held by two jobs charges each half (TESTING.md invariant
    7: a shared GPU-second is never counted twice). Bins of ``width_s`` s from ``start_s``."""
    by_gpu: dict[int, list[tuple[float, float, int]]] = {}
    for gpu, tenant_id, begin, end in placements:
        by_gpu.setdefault(gpu, []).append((begin, end, tenant_id))
    charged = _Bins(start_s, width_s, bins)
    for held in by_gpu.values():
        if len(held) == 1:
            begin, end, tenant_id = held[0]
            charged.add(tenant_id, begin, end, 1.0)
            continue
        events = sorted([(b, 1, t) for b, _, t in held] + [(e, -1, t) for _, e, t in held])
        active: list[int] = []
        last = events[0][0]
        for moment, change, tenant_id in events:
            if active and moment > last:
                for holder in active:
                    charged.add(holder, last, moment, 1.0 / len(active))
            if change > 0:
                active.append(tenant_id)
            else:
                active.remove(tenant_id)
            last = moment
    return charged.totals()


def _demand_bins(
    start: datetime, now: datetime, width_s: float, bins: int, first_active: Mapping[int, float | None]
) -> dict[int, list[bool]]:
    """``{tenant id: [had a pending or running job during bin k]}`` (a difference array per
    tenant: +1 in the bin where a job's life in the queue or on GPUs begins, −1 after the bin
    where it ends; now for a job still pending or running). ``first_active``: ``{tenant id:
    submission (epoch s) of its oldest pending or running job, or None}``."""
    start_s = start.timestamp()
    diffs: dict[int, list[int]] = {}

    def mark(tenant_id: int, lo: float, hi: float) -> None:
        diff = diffs.setdefault(tenant_id, [0] * (bins + 1))
        diff[min(bins - 1, max(0, int(lo)))] += 1
        diff[min(bins, max(0, int(hi)) + 1)] -= 1

    def bin_of(field: str) -> Any:
        return BinIndex((EpochSeconds(field) - Value(start_s)) / Value(width_s))

    for tenant_id, first in first_active.items():
        if first is not None:
            mark(tenant_id, (first - start_s) // width_s, bins - 1)
    # finished jobs: only the distinct (tenant, first bin, last bin) triples leave the database
    ended = (
        Job.objects.filter(finished_at__gt=start, submitted_at__lt=now)
        .order_by()
        .annotate(lo=bin_of("submitted_at"), hi=bin_of("finished_at"))
        .values_list("tenant_id", "lo", "hi")
        .distinct()
    )
    for tenant_id, lo, hi in _raw_rows(ended):
        mark(tenant_id, lo, hi)
    demand = {}
    for tenant_id, diff in diffs.items():
        level, flags = 0, []
        for k in range(bins):
            level += diff[k]
            flags.append(level > 0)
        demand[tenant_id] = flags
    return demand


def _bars(
    live: Mapping[str, Any], name: str, metric: str, scale: float, title: str, axis: str
) -> dict[str, Any]:
    """``{name: per-tenant bars}``, or nothing when no tenant has a value (no empty axes)."""
    if all(values.get(metric) is None for values in live["live"].values()):
        return {}
    return {name: figures.tenant_bars_spec(live, metric, scale, title, axis, colour_by_tenant=True)}


#: How the summary names each reclaim mode (``SchedulerConfig.reclaim``, docs/FAIRNESS.md §1).
RECLAIM_WORDS = {
    "preempt": "preemption",
    "bound": "bounding borrowers' remaining time",
    "both": "preemption and bounding borrowers' remaining time",
}


def fairness_payload(viewer: Viewer, window_s: int) -> dict[str, Any]:
    """Per tenant over the last ``window_s`` s: GPUs in use vs quota (stacked), Jain's index over
    time, mean JCT and queueing delay, GPU-hours.

    Jain's index (Jain, Chiu & Hawe 1984) of bin k is taken over the tenants with a guaranteed
    quota that had work (a pending or running job) in that bin, of ``x_t = GPUs in use ÷
    guaranteed GPUs``: 1 when every such tenant gets the same multiple of its quota. It is the
    same for every viewer (a cluster-wide figure that names no job). Mean JCT (submit → finish)
    is over the tenant's succeeded jobs; mean queueing delay (submit → first start) over its
    started jobs; GPU-hours over the window, a shared GPU-hour charging each job half.

    Quotas (docs/FAIRNESS.md §1): guaranteed GPUs and borrow limit summed over the tenant's
    ``Quota`` rows (``scheduling.services.summed_quotas``; "unlimited": no limit, "none": no quota
    row); GPUs held now = GPUs of its running gangs; borrowed now = held − guaranteed, at least 0.
    Table ``scheduler``: the cluster-wide starvation bound, aging, reclaim mode and borrow bound;
    the summary names the policy (``SHAREWISE_POLICY``) and how it actually reclaims lent GPUs.
    """
    now = timezone.now()
    start = now - timedelta(seconds=window_s)
    tenants = dict(Tenant.objects.values_list("id", "name"))
    if not tenants:
        return _payload(viewer, now, empty="No tenants yet: create one with manage.py create_tenant.")
    full_quotas = summed_quotas(
        Quota.objects.order_by().values_list("tenant_id", "guaranteed_gpus", "borrow_limit")
    )
    quotas = {t: q.guaranteed_gpus for t, q in full_quotas.items()}
    config = scheduler_config()
    policy = policy_named()
    # only a policy that reclaims by preemption (sjf-bsbf-fair) uses the preempting modes; every
    # other policy bounds borrowers' remaining time instead (scheduling.core.quota.QuotaGate)
    reclaim = (
        RECLAIM_WORDS[config.reclaim]
        if getattr(policy, "reclaims", False)
        else f"{RECLAIM_WORDS['bound']} ({policy.name} cannot preempt)"
    )
    width_s = window_s / FAIRNESS_BINS
    charged = _usage_bins(_window_usage(start, now), start.timestamp(), width_s, FAIRNESS_BINS)
    succeeded = Q(status=Job.Status.SUCCEEDED, finished_at__isnull=False)
    # one pass over the jobs for every tenant: the table's figures and the oldest active job
    stats = {
        t: (finished, avg_jct, avg_queue, pending, in_use, first_active)
        for t, finished, avg_jct, avg_queue, pending, in_use, first_active in _raw_rows(
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
    }
    demand = _demand_bins(start, now, width_s, FAIRNESS_BINS, {t: row[5] for t, row in stats.items()})
    jain: list[float | None] = []
    for k in range(FAIRNESS_BINS):
        xs = [
            charged.get(t, [0.0] * FAIRNESS_BINS)[k] / width_s / quotas[t]
            for t in tenants
            if quotas.get(t, 0) > 0 and demand.get(t, [False] * FAIRNESS_BINS)[k]
        ]
        jain.append(_round(jain_index(xs), 3) if xs else None)
    visible = {t: n for t, n in tenants.items() if viewer.sees(t)}

    times = [iso(start + timedelta(seconds=k * width_s)) for k in range(FAIRNESS_BINS)]
    usage = {
        visible[t]: [round(s / width_s, 3) for s in charged.get(t, [0.0] * FAIRNESS_BINS)] for t in visible
    }
    per_tenant: dict[str, dict[str, float | None]] = {}
    rows = []
    for t, name in sorted(visible.items(), key=lambda kv: kv[1]):
        finished, avg_jct, avg_queue, pending, in_use, _ = stats.get(t, (0, None, None, 0, None, None))
        gpu_hours = sum(charged.get(t, ())) / 3600.0
        per_tenant[name] = {"avg_jct_s": avg_jct, "avg_queue_s": avg_queue, "gpu_hours": gpu_hours}
        quota = full_quotas.get(t)
        limit: int | str = "none"  # no Quota row: no guarantee, may only borrow
        if quota is not None:
            limit = "unlimited" if quota.borrow_limit is None else quota.borrow_limit
        held = in_use or 0
        rows.append(
            [
                name,
                quotas.get(t, 0),
                limit,
                held,
                max(0, held - quotas.get(t, 0)),
                round(gpu_hours, 3),
                finished,
                pending,
                _round(avg_jct, 1),
                _round(avg_queue, 1),
            ]
        )
    live = {"live": per_tenant}
    minutes = f"{window_s / 60:g} min"
    current = next((j for j in reversed(jain) if j is not None), None)
    summary = (
        f"Jain's index now: {current if current is not None else 'n/a (no tenant with work and quota)'}; "
        f"GPU-hours over the last {minutes}. Policy {policy.name}; starvation bound "
        f"{config.starvation_bound_s / 3600:g} h; borrowed GPUs reclaimed by {reclaim}. "
        f"GPUs held count a shared GPU once for each of its two jobs, so they may add up to more "
        f"than the cluster."
    )
    return _payload(
        viewer,
        now,
        summary=summary,
        figures_={
            "usage": figures.tenant_usage_spec(times, usage, {visible[t]: quotas.get(t, 0) for t in visible}),
            "jain": figures.jain_spec(times, jain),
            **_bars(live, "jct", "avg_jct_s", 1 / 60.0, "Mean JCT per tenant", "mean JCT (min)"),
            **_bars(
                live,
                "queueing",
                "avg_queue_s",
                1 / 60.0,
                "Mean queueing delay per tenant",
                "mean queueing delay (min)",
            ),
            **_bars(
                live, "gpu_hours", "gpu_hours", 1.0, f"GPU-hours per tenant (last {minutes})", "GPU-hours"
            ),
        },
        tables={
            "scheduler": _table(
                ["setting", "value"],
                [
                    ["starvation bound s", config.starvation_bound_s],
                    ["aging s", config.aging_s],
                    ["reclaim", config.reclaim],
                    ["borrow bound s", config.borrow_bound_s],
                ],
                "Cluster-wide (settings SHAREWISE_STARVATION_BOUND_S, SHAREWISE_AGING_S, SHAREWISE_RECLAIM, "
                "SHAREWISE_BORROW_BOUND_S; docs/FAIRNESS.md).",
            ),
            "tenants": _table(
                [
                    "tenant",
                    "guaranteed GPUs",
                    "borrow limit",
                    "GPUs held now",
                    "GPUs borrowed now",
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


# ---------------------------------------------------------------------------------- queue
def policy_order(waiting: Sequence[int], latest: RoundView | None, arrivals: Sequence[int]) -> list[int]:
    """Pending job ids in the order the policy considers them.

    ``waiting``: the pending job ids; ``arrivals``: pending ids by ``(submitted_at, id)``. The
    latest round lists its ``wait`` decisions in the policy's own order
    (``scheduling.core.placement`` appends them as it walks the sorted queue), so those come first
    in that order; jobs submitted since (or requeued) follow by arrival, ties by id, as every
    policy breaks ties (``scheduling.core.policies``).
    """
    pending = set(waiting)
    ranked: list[int] = []
    seen: set[int] = set()
    for job_id, _ in latest.waits if latest is not None else ():
        if job_id in pending and job_id not in seen:
            ranked.append(job_id)
            seen.add(job_id)
    ranked.extend(j for j in arrivals if j not in seen)
    return ranked


def queue_payload(viewer: Viewer, limit: int) -> dict[str, Any]:
    """Waiting jobs in policy order (position among all waiting jobs), how long each has waited
    (since submission or its last preemption/requeue), and the latest round's reason."""
    now = timezone.now()
    pending = Job.objects.filter(status=Job.Status.PENDING)
    owners = dict(_raw_rows(pending.order_by().values_list("id", "tenant_id")))
    if not owners:
        return _payload(viewer, now, empty="No job is waiting.")
    rounds = latest_rounds(1)
    latest = rounds[0] if rounds else None
    in_round = {j for j, _ in latest.waits} if latest else set()
    newcomers = [j for j in owners if j not in in_round]
    if len(newcomers) > 500:  # sorting in SQL beats shipping the timestamps
        arrivals = list(pending.order_by("submitted_at", "id").values_list("id", flat=True))
    else:
        arrivals = list(
            pending.filter(id__in=newcomers).order_by("submitted_at", "id").values_list("id", flat=True)
        )
    order = policy_order(list(owners), latest, arrivals)
    positions = [(i + 1, j) for i, j in enumerate(order) if viewer.sees(owners[j])]
    total = len(positions)
    if not total:
        return _payload(viewer, now, empty="No job of yours is waiting.")
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
    shown_ids = set(ids)
    reasons = dict(w for w in latest.waits if w[0] in shown_ids) if latest else {}
    reasons = dict(zip(reasons, _JobNames().redact(list(reasons.values()), viewer), strict=True))
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
