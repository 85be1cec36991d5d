"""The sharing decisions endpoint: the last rounds' starts, pairs, preemptions and waits, and
per-round counts."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from cluster.models import Job
from frontend.payloads import memo
from frontend.payloads.clock import TimeScale, time_scale
from frontend.payloads.common import JobNames, Viewer, cited_jobs, payload, raw_rows, rounded, table
from frontend.payloads.rounds import ROUND_CACHE_SIZE, RoundView, latest_rounds, round_summaries
from scheduling import figures

#: Waiting jobs listed per round (the queue lists them all).
WAITS_PER_ROUND = 20
#: Rounds counted in the started / waiting / preempted chart.
COUNTED_ROUNDS = 30
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


def decisions_payload(viewer: Viewer, n_rounds: int) -> Mapping[str, Any]:
    """The last ``n_rounds`` rounds' decisions: who was paired with whom and why (predicted
    T_seq vs T_con, ξ of both, sub-batch), what started alone, what was preempted, and why jobs
    wait (the first :data:`WAITS_PER_ROUND` per round; the queue lists them all).
    A member sees the decisions about the tenant's jobs; a partner of another tenant is shown
    as "another tenant's job" with its ξ (the slowdown it causes is the member's business)."""
    now = timezone.now()
    scale = time_scale()
    counts = round_summaries(max(COUNTED_ROUNDS, n_rounds))
    if not counts:
        return payload(viewer, now, empty="No scheduling round has run yet.")
    shown = latest_rounds(n_rounds, counts)  # the newest n_rounds of the rows just read
    names = JobNames()
    own = _own_jobs(viewer, shown)
    waits = {r.pk: r.waits if own is None else own_waits(r, own, viewer.tenant_id) for r in shown}
    listed = [w for r in shown for w in waits[r.pk][:WAITS_PER_ROUND]]
    wanted = {
        j
        for r in shown
        for d in r.acts
        for j in (d["job_id"], *(s["partner_id"] for s in d.get("shares") or ()))
    }
    wanted.update(j for j, _ in listed)
    if not viewer.is_admin:  # the jobs the reasons cite, looked up now (redacted below)
        wanted |= cited_jobs([d.get("reason", "") for r in shown for d in r.acts] + [t for _, t in listed])
    names.load(wanted)  # one query (per 500 jobs) for every job shown or cited
    # the body is a function of these alone (a round's record never changes; the names of the
    # jobs it shows are read above): kept while they are equal (frontend.payloads.memo)
    inputs = (
        counts,
        [(r.pk, len(waits[r.pk]), list(waits[r.pk][:WAITS_PER_ROUND])) for r in shown],
        sorted(names.known.items()),
        scale,
    )
    return memo.built_from(
        ("decisions", n_rounds, viewer.tenant_id, viewer.tenant_name),
        inputs,
        now,
        lambda: _body(viewer, now, scale, counts, shown, names, own),
    )


def _body(
    viewer: Viewer,
    now: datetime,
    scale: TimeScale,
    counts: Sequence[tuple],
    shown: Sequence[RoundView],
    names: JobNames,
    own: frozenset[int] | None,
) -> dict[str, Any]:
    """The body of :func:`decisions_payload` from its rows: ``counts`` (:func:`round_summaries`),
    the rounds ``shown``, ``names`` knowing every job they show and cite, the member's ``own``
    jobs (``None``: an admin)."""
    rows: list[list[Any]] = []
    pairs: list[dict[str, Any]] = []
    for r in shown:
        own_rows, shares = round_rows(r, scale.at_dt(r.started_at), own, names, viewer)
        rows += own_rows
        pairs += shares
    series = [
        {"started_at": scale.at_dt(c[1]), "n_started": c[4], "n_waiting": c[5], "n_preempted": c[6]}
        for c in reversed(counts)
    ]
    _, started_at, policy, duration_ms, n_started, n_waiting, n_preempted = counts[0]
    summary = (
        f"Latest round {scale.moment_words(started_at)} ({policy}, {duration_ms:.0f} ms): {n_started} "
        f"started, {n_waiting} waiting, {n_preempted} preempted; {len(pairs)} sharing decisions in the "
        f"last {len(shown)} rounds{_span(scale, shown)}."
    )
    count_rows = [[c["started_at"], c["n_started"], c["n_waiting"], c["n_preempted"]] for c in series]
    return payload(
        viewer,
        now,
        summary=summary,
        figures_={
            **({"pairs": figures.pair_decisions_spec(pairs)} if pairs else {}),
            "round_counts": figures.round_counts_spec(series, scale.axis),
        },
        tables={
            "decisions": table(
                (_round_column(scale), *DECISION_COLUMNS[1:]),
                rows,
                "" if rows else "No decision about your jobs.",
            ),
            "round_counts": table(
                [_round_column(scale), "started", "waiting", "preempted"], count_rows, scale.note
            ),
        },
    )


def _round_column(scale: TimeScale) -> str:
    """The name of the column of a round's start: ``"round"`` (UTC) or ``"round (trace s)"``."""
    return "round (trace s)" if scale.is_trace else "round"


def _short(when: str | float) -> str:
    """A round's start for a chart label: ``"14:02:03"`` (UTC) or ``"t=1,234 s"``."""
    return f"t={when:,.0f} s" if isinstance(when, float) else when[11:19]


def _span(scale: TimeScale, shown: Sequence[RoundView]) -> str:
    """``" (1,200 s of trace time)"``: how long the rounds ``shown`` (newest first) span."""
    if len(shown) < 2:
        return ""
    span = scale.seconds((shown[0].started_at - shown[-1].started_at).total_seconds())
    return f" ({span:,.0f} {'s of trace time' if scale.is_trace else 's'})"


def _own_jobs(viewer: Viewer, shown: Sequence[RoundView]) -> frozenset[int] | None:
    """Ids of the member's jobs that may appear in the rounds ``shown`` (unfinished, or finished
    since the oldest of them); ``None`` for an admin (every job)."""
    if viewer.is_admin or not shown:
        return None
    alive = Q(finished_at__isnull=True) | Q(finished_at__gte=shown[-1].started_at)
    return frozenset(
        j
        for (j,) in raw_rows(
            Job.objects.filter(alive, tenant_id=viewer.tenant_id).order_by().values_list("id")
        )
    )


_own_waits: OrderedDict[tuple[int, datetime, int | None], tuple[frozenset[int], list[tuple[int, str]]]] = (
    OrderedDict()
)
_own_waits_lock = threading.Lock()


def own_waits(r: RoundView, own: frozenset[int], tenant_id: int | None) -> list[tuple[int, str]]:
    """The waits of round ``r`` whose job is in ``own`` (the jobs of tenant ``tenant_id``'s member), in
    order. A round never
    changes, so the list is kept per process with the ``own`` it was filtered by and reused
    while a poll's ``own`` is equal (a set comparison, not a pass over 6,000 waits per round);
    at most :data:`~frontend.payloads.rounds.ROUND_CACHE_SIZE` kept."""
    key = (r.pk, r.started_at, tenant_id)
    with _own_waits_lock:
        kept = _own_waits.get(key)
    if kept is not None and kept[0] == own:
        return kept[1]
    mine = [w for w in r.waits if w[0] in own]
    with _own_waits_lock:
        _own_waits[key] = (own, mine)
        _own_waits.move_to_end(key)
        while len(_own_waits) > ROUND_CACHE_SIZE:
            _own_waits.popitem(last=False)
    return mine


# (round id, start, viewer's tenant id and name, admin) → (the jobs its starts and preemptions
# show or cite, fingerprint, rows, shares): a round never changes, so its rows are built once
# per viewer and kept while the names they show are the same
KeptRows = tuple[frozenset[int], tuple[Any, ...], list[list[Any]], list[Any]]
_kept_rows: OrderedDict[tuple[Any, ...], KeptRows] = OrderedDict()
_kept_rows_lock = threading.Lock()


def round_rows(
    r: RoundView, when: str | float, own: frozenset[int] | None, names: JobNames, viewer: Viewer
) -> tuple[list[list[Any]], list[dict[str, Any]]]:
    """The table rows of round ``r`` (its starts and preemptions, :func:`_act_rows`, then its
    waits, :func:`_wait_rows`; reasons redacted for ``viewer``) and its shares for the chart.
    Kept per process for each round and viewer (at most
    :data:`~frontend.payloads.rounds.ROUND_CACHE_SIZE`) and reused while the rows' inputs are
    equal: ``when`` (the round's start as shown), the waits listed and their count, and what
    ``names`` knows of every job the rows show or cite (so a job renamed, deleted or moved to
    another tenant is built again). The lists returned are shared: read them, never change them.
    ``names`` must know the jobs of ``r.acts`` (and, for a member, those their reasons cite)."""
    mine = list(r.waits) if own is None else own_waits(r, own, viewer.tenant_id)
    listed = mine[:WAITS_PER_ROUND]
    names.load(j for j, _ in listed)
    key = (r.pk, r.started_at, viewer.tenant_id, viewer.tenant_name, viewer.is_admin)
    with _kept_rows_lock:
        kept = _kept_rows.get(key)
    acts_jobs = kept[0] if kept is not None else _acts_jobs(r)
    waits_jobs = {j for j, _ in listed} | cited_jobs(reason for _, reason in listed)
    known = names.known
    fingerprint = (
        when,
        len(mine),
        tuple(listed),
        tuple((j, known.get(j)) for j in sorted(acts_jobs | waits_jobs)),
    )
    if kept is not None and kept[1] == fingerprint:
        return kept[2], kept[3]
    rows, pairs = _act_rows(r, when, names, viewer)
    rows += _wait_rows(r, when, own, names, viewer)
    for row, text in zip(rows, names.redact([row[-1] for row in rows], viewer), strict=True):
        row[-1] = text
    with _kept_rows_lock:
        _kept_rows[key] = (acts_jobs, fingerprint, rows, pairs)
        _kept_rows.move_to_end(key)
        while len(_kept_rows) > ROUND_CACHE_SIZE:
            _kept_rows.popitem(last=False)
    return rows, pairs


def _acts_jobs(r: RoundView) -> frozenset[int]:
    """The jobs the starts and preemptions of ``r`` show (job, partners) or cite (reasons)."""
    shown = {j for d in r.acts for j in (d["job_id"], *(s["partner_id"] for s in d.get("shares") or ()))}
    return frozenset(shown | cited_jobs(d.get("reason", "") for d in r.acts))


def forget() -> None:
    """Drop this process's kept rows of rounds and members' own waits (tests whose database
    repeats ids and moments)."""
    with _kept_rows_lock:
        _kept_rows.clear()
    with _own_waits_lock:
        _own_waits.clear()


def _act_rows(
    r: RoundView, when: str | float, names: JobNames, viewer: Viewer
) -> tuple[list[list[Any]], list[dict[str, Any]]]:
    """Rows of the starts and preemptions of round ``r`` that ``viewer`` sees (one per partner
    for a shared start), and its shares for the T_seq/T_con chart. ``names`` must know the jobs
    and partners of ``r.acts``; ``when``: the round's start (ISO)."""
    rows: list[list[Any]] = []
    pairs: list[dict[str, Any]] = []
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
                        "label": f"{job} + {partner} ({_short(when)})",
                        "t_seq_s": share["t_seq_s"],
                        "t_con_s": share["t_con_s"],
                        "xi_self": share["xi_self"],
                        "xi_partner": share["xi_partner"],
                        "sub_batch": d.get("sub_batch"),
                    }
                )
    return rows, pairs


def _share_cells(share: Mapping[str, Any] | None) -> list[float | None]:
    """ξ self, ξ partner, T_seq and T_con (s) of a share, rounded; ``None`` × 4 without one."""
    if share is None:
        return [None, None, None, None]
    return [
        rounded(share["xi_self"]),
        rounded(share["xi_partner"]),
        rounded(share["t_seq_s"], 1),
        rounded(share["t_con_s"], 1),
    ]


def _wait_rows(
    r: RoundView, when: str | float, own: frozenset[int] | None, names: JobNames, viewer: Viewer
) -> list[list]:
    """Rows of the first :data:`WAITS_PER_ROUND` waits of round ``r`` among ``own`` job ids
    (``None``: all), and a row counting the rest if there are more."""
    mine = list(r.waits) if own is None else own_waits(r, own, viewer.tenant_id)
    waits = mine[:WAITS_PER_ROUND]
    names.load(j for j, _ in waits)
    rows: list[list[Any]] = []
    for job_id, reason in waits:
        job, tenant, _ = names.label(job_id, viewer)
        rows.append([when, r.policy, "wait", job, tenant, "", None, None, "", None, None, None, None, reason])
    if len(mine) > len(waits):
        more = f"… and {len(mine) - len(waits)} more waiting jobs"
        rows.append(
            [when, r.policy, "wait", more, "", "", None, None, "", None, None, None, None, "see the queue"]
        )
    return rows
