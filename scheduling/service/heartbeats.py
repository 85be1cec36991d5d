"""Heartbeats of the node agents (docs/AGENT.md §3) and the heartbeat timeout.

- :func:`record_heartbeat` — the node's time, its GPUs' health and memory, and the
  reconciliation of what it runs against what the database places on it.
- :func:`check_heartbeats` — nodes silent for longer than ``SHAREWISE_HEARTBEAT_TIMEOUT_S`` become
  ``unhealthy`` and their jobs go back to pending with the progress last reported
  (ARCHITECTURE.md, data flow step 8; TESTING.md invariants 6 and 9). Every
  :func:`~scheduling.service.tick.tick` runs it before its round.

Units: seconds (s), MB, iterations.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.db.models import Field, Max, Q
from django.utils import timezone

from cluster import plain_rows
from cluster.compiled import meta
from cluster.models import GPU, Job, Node, Placement
from scheduling.service.dispatch import Message, dispatch_after_commit, stop_messages
from scheduling.service.generations import next_generations
from scheduling.service.health import CACHE_ERRORS
from scheduling.service.jobs import advance_progress, requeue
from scheduling.service.placement_facts import jobs_placements
from scheduling.service.silence import Hearing, fleet_hearing, heartbeat_timeout_s, is_silent

log = logging.getLogger(__name__)


def heartbeat_interval_s() -> float:
    """Seconds between heartbeats of an agent (setting ``SHAREWISE_HEARTBEAT_INTERVAL_S``; the
    agent's ``--heartbeat-s``)."""
    return float(settings.SHAREWISE_HEARTBEAT_INTERVAL_S)


#: The attribute of the log record :func:`check_heartbeats` writes per node it marks (the node's
#: name), so a command that prints its own line about that node can leave this one out.
NODE_MARKED = "node_marked"


def check_heartbeats(now: datetime | None = None) -> dict[str, list[int]]:
    """Mark ``ready`` nodes silent for longer than ``SHAREWISE_HEARTBEAT_TIMEOUT_S`` as
    ``unhealthy`` (no new work) and requeue their running jobs, progress kept; a silent node that
    is ``draining`` or ``unhealthy`` keeps its status and its jobs are requeued the same way.

    Silence is judged against the newest heartbeat the service has read from any node, not the
    wall clock, and the timeout counts on top of the fleet's report latency as the agents
    measured it (:func:`~scheduling.service.silence.is_silent`): a service too busy or too slow to
    read heartbeats blames no node for its own delay, while a node whose agent died among live
    ones is detected within the timeout plus that latency, at most ``SHAREWISE_SILENCE_ALLOWANCE_MAX_S``
    (every node silent at once: within twice that). A node never heard from
    gets the same deadline from its registration (``created_at``): an agent that never starts
    must not hold jobs forever (:func:`~scheduling.service.snapshot.node_takes_jobs` gives it no
    new ones after that either). Its first heartbeat makes it ``ready`` again. Returns ``{node
    name: [requeued job ids]}`` for the nodes marked now. Called before each round by
    :func:`~scheduling.service.tick.tick` (Celery's round task, ``run_scheduler``, the demo) and
    between rounds by Celery beat (``sharewise.check_heartbeats``).
    """
    now = now or timezone.now()
    timeout_s = heartbeat_timeout_s()
    hearing = fleet_hearing()
    marked: dict[str, list[int]] = {}
    ready = Node.objects.filter(status=Node.Status.READY).values_list(
        "pk", "name", "last_heartbeat", "created_at"
    )
    for pk, name, heard, registered in ready:
        if not is_silent(heard, registered, hearing, now, timeout_s):
            continue
        with transaction.atomic():
            # only if no heartbeat came meanwhile (it would have moved last_heartbeat)
            unchanged = Q(last_heartbeat__isnull=True) if heard is None else Q(last_heartbeat=heard)
            changed = Node.objects.filter(unchanged, pk=pk, status=Node.Status.READY).update(
                status=Node.Status.UNHEALTHY
            )
            if not changed:
                continue
            forget_cluster_facts()  # its GPUs no longer bound a submission's gang
            why = _silence(f"node {name}", heard, now, timeout_s)
            marked[name] = _give_back(pk, now, why)
        requeued = ", ".join(map(str, marked[name])) or "none"
        # ``node_marked``: a command printing its own line per node (run_scheduler) drops this one
        log.warning("%s: marked unhealthy; requeued jobs: %s", why, requeued, extra={NODE_MARKED: name})
    marked.update(_requeue_from_silent_unready(now, timeout_s, hearing))
    return marked


def _requeue_from_silent_unready(now: datetime, timeout_s: float, hearing: Hearing) -> dict[str, list[int]]:
    """The jobs still placed on a silent node that is not ``ready`` — ``draining`` (an admin's
    maintenance: the usual moment for an agent to be stopped) or ``unhealthy`` by an admin's hand
    — back to pending, progress kept; the node keeps its status (a drained node must not become
    ready at its agent's return). Before, only ``ready`` nodes were judged, and such a node's jobs
    showed ``running`` for ever once its agent died. One query when no such node holds a job."""
    holding = (
        Node.objects.exclude(status=Node.Status.READY)
        .filter(gpus__placements__active=True)
        .distinct()
        .values_list("pk", "name", "status", "last_heartbeat", "created_at")
    )
    marked: dict[str, list[int]] = {}
    for pk, name, status, heard, registered in holding:
        if not is_silent(heard, registered, hearing, now, timeout_s):
            continue
        with transaction.atomic():
            # only if no heartbeat came meanwhile (it would have moved last_heartbeat); the row's
            # lock is taken first, as the ready nodes' UPDATE above takes it
            unchanged = Q(last_heartbeat__isnull=True) if heard is None else Q(last_heartbeat=heard)
            if not Node.objects.select_for_update().filter(unchanged, pk=pk).exists():
                continue
            why = _silence(f"node {name} ({status})", heard, now, timeout_s)
            marked[name] = _give_back(pk, now, why)
        requeued = ", ".join(map(str, marked[name])) or "none"
        log.warning("%s; requeued jobs: %s", why, requeued, extra={NODE_MARKED: name})
    return marked


def _silence(node: str, heard: datetime | None, now: datetime, timeout_s: float) -> str:
    """Why ``node`` (its words, e.g. ``node node-00``) counts as silent: never heard from within
    ``timeout_s`` of its registration, or silent since ``heard`` by the wall clock (what an
    operator checks)."""
    if heard is None:
        return f"{node} sent no heartbeat within {timeout_s:.0f} s of its registration"
    return f"{node} silent for {(now - heard).total_seconds():.0f} s (heartbeat timeout)"


def _give_back(node_pk: int, now: datetime, why: str) -> list[int]:
    """The jobs placed on node ``node_pk`` back to pending with their progress (:func:`requeue`,
    reason ``why``); the ids requeued."""
    jobs = set(Placement.objects.filter(active=True, gpu__node_id=node_pk).values_list("job_id", flat=True))
    return requeue(sorted(jobs), now, why)


def mark_heard(node: Node, at: datetime) -> None:
    """Record that ``node``'s agent was heard from at ``at`` (its last heartbeat, never moved
    back): a batch report (docs/AGENT.md §2b) counts from the moment it is read and while its
    items are applied, which under load took up to 17 s, and the node, whose next report waits
    for the answer, must not look silent for the time the server takes. Its status and GPUs
    change only with the heartbeat itself
    (:func:`record_heartbeat`)."""
    moment = connection.ops.adapt_datetimefield_value(at)
    plain_rows.run(_heard_sql(connection.vendor), [moment, node.pk, moment])


@functools.cache
def _heard_sql(vendor: str) -> str:
    """:func:`mark_heard`'s UPDATE (parameters: the moment, the node's id, the moment), plain:
    it runs on every report, and the ORM's compilation of it cost more than running it."""
    q = connection.ops.quote_name
    n = meta(Node)
    last = q(n.get_field("last_heartbeat").column)
    return (
        f"UPDATE {q(n.db_table)} SET {last} = %s "
        f"WHERE {q(n.pk.column)} = %s AND ({last} IS NULL OR {last} < %s)"
    )


@functools.cache
def _ready_sql(vendor: str) -> str:
    """A ready node's heartbeat time and report latency (parameters: both, the node's id, the
    ``ready`` status)."""
    q = connection.ops.quote_name
    n = meta(Node)
    last, latency, status = (
        q(n.get_field(f).column) for f in ("last_heartbeat", "report_latency_s", "status")
    )
    return (
        f"UPDATE {q(n.db_table)} SET {last} = %s, {latency} = %s "
        f"WHERE {q(n.pk.column)} = %s AND {status} = %s"
    )


@functools.cache
def _placed_here_sql(vendor: str) -> tuple[str, tuple[Field | None, ...]]:
    """The active rows on a node: job, row's start, job's status (parameter: the node's id)."""
    q = connection.ops.quote_name
    p, g, j = meta(Placement), meta(GPU), meta(Job)
    pc = {f: q(p.get_field(f).column) for f in ("job", "gpu", "created_at", "active")}
    sql = (
        f"SELECT P.{pc['job']}, P.{pc['created_at']}, J.{q(j.get_field('status').column)} "
        f"FROM {q(p.db_table)} P INNER JOIN {q(g.db_table)} G ON P.{pc['gpu']} = G.{q(g.pk.column)} "
        f"INNER JOIN {q(j.db_table)} J ON P.{pc['job']} = J.{q(j.pk.column)} "
        f"WHERE P.{pc['active']} AND G.{q(g.get_field('node').column)} = %s"
    )
    return sql, (p.get_field("job"), p.get_field("created_at"), j.get_field("status"))


def record_heartbeat(
    node: Node,
    gpus: Sequence[dict[str, Any]],
    running: Sequence[dict[str, Any]],
    now: datetime | None = None,
    report_latency_s: float = 0.0,
) -> dict[str, Any]:
    """Apply one heartbeat of ``node`` (AGENT.md §3): record the time (an ``unhealthy`` node is
    ``ready`` again), update its GPUs, reconcile.

    ``gpus``: ``[{"index", "uuid", "memory_mb", "healthy"}]`` — a GPU absent from it, or reported
    unhealthy, takes no new work (a blip to zero GPUs does not stop running jobs); ``memory_mb``
    and an NVML uuid (``GPU-…``) replace the stored ones. ``running``: ``[{"job_id",
    "generation", "iterations_done"}]``. Reconciliation: a job placed here more than one heartbeat
    interval ago but missing from the heartbeats for at least one interval is requeued with its
    progress (the agent lost it); a reported job the database does not place here gets a
    ``stop`` with a new generation; progress keeps the maximum. ``report_latency_s``: how long
    the agent's previous report took (s, validated 0 … 3600), stored with the time for the silence
    rule (:mod:`~scheduling.service.silence`). Returns ``{"stopped": [job ids], "requeued": [job
    ids]}``.
    """
    now = now or timezone.now()
    stops: list[Message] = []
    with transaction.atomic():
        # a ready node (the usual case) in one statement; otherwise the time, then unhealthy → ready
        heard = {"last_heartbeat": now, "report_latency_s": report_latency_s}
        moment = connection.ops.adapt_datetimefield_value(now)
        params = [moment, report_latency_s, node.pk, Node.Status.READY.value]
        if not plain_rows.run(_ready_sql(connection.vendor), params):
            Node.objects.filter(pk=node.pk).update(**heard)
            if Node.objects.filter(pk=node.pk, status=Node.Status.UNHEALTHY).update(status=Node.Status.READY):
                forget_cluster_facts()  # its GPUs count for a submission's gang again
        reported = {int(r["job_id"]): r for r in running}
        expected: dict[int, datetime] = {}
        # the job's status is read, not filtered on: a filter let the planner start from the
        # job_status index, whose entries for every version of a job that was ever running stay
        # until VACUUM — 20 scans of them per heartbeat, 61 ms at 15,000 ended jobs on a server
        # without autovacuum against 0.2 ms from the node's active rows (docs/PERFORMANCE.md §10)
        sql, fields = _placed_here_sql(connection.vendor)
        for job_id, created, status in plain_rows.select(sql, [node.pk], fields):
            if status == Job.Status.RUNNING:
                expected[job_id] = max(created, expected.get(job_id, created))
        missing = _missing_twice(
            node,
            [
                j
                for j, placed in expected.items()
                if j not in reported and (now - placed).total_seconds() > heartbeat_interval_s()
            ],
            now,
        )
        listed = {j: row for j, row in reported.items() if j in expected}
        if missing:  # both groups' rows at once, by ascending key (docs/LOCKS.md)
            lock_jobs(sorted({*missing, *listed}))
        requeued = requeue(missing, now, f"node {node.name} no longer runs it (agent restarted or lost it)")
        _heartbeat_progress(listed)
        unexpected = {j: int(row.get("generation", 0)) for j, row in reported.items() if j not in expected}
        stops = _stop_messages(node, unexpected)
        # last, after the jobs' rows: a new uuid (a unique column) takes the GPU row's strongest
        # lock, which a round's new placement on the GPU waits for (FOR KEY SHARE) while holding
        # the jobs the heartbeat would wait for (docs/LOCKS.md)
        _update_gpus(node, gpus)
        dispatch_after_commit(stops)
    return {"stopped": [m["job_id"] for m in stops], "requeued": requeued}


def lock_jobs(job_ids: Sequence[int]) -> None:
    """Lock the rows of jobs ``job_ids`` (sorted ascending) in one ``SELECT … ORDER BY id FOR
    UPDATE`` (nothing on SQLite, which locks the whole database on write). A heartbeat that
    requeues some of its node's jobs and advances others locks them all so first: locked group
    by group (the requeued ones, then the advanced ones) a job of the first with a higher key
    than one of the second was taken before it, and a round preempting both, which locks them by
    ascending key, deadlocked with it (tests/service/test_heartbeat_lock_order.py)."""
    if not job_ids or not connection.features.has_select_for_update:
        return
    q = connection.ops.quote_name
    j = meta(Job)
    key = q(j.pk.column)
    sql = (
        f"SELECT {key} FROM {q(j.db_table)} WHERE {key} IN ({plain_rows.marks(len(job_ids))}) "
        f"ORDER BY {key} FOR UPDATE"
    )
    plain_rows.select(sql, list(job_ids), (None,))


def _update_gpus(node: Node, reported: Sequence[dict[str, Any]]) -> None:
    by_index = {int(g["index"]): g for g in reported}
    for gpu in plain_rows.all_by(GPU, {"node": node.pk}):
        info = by_index.get(gpu.index)
        healthy = bool(info and info.get("healthy"))
        fields = []
        if gpu.healthy != healthy:
            gpu.healthy = healthy
            fields.append("healthy")
        nvml = info is not None and str(info.get("uuid", "")).startswith("GPU-")
        if info and healthy and nvml and int(info.get("memory_mb") or 0) > 0:
            if gpu.memory_mb != int(info["memory_mb"]):
                gpu.memory_mb = int(info["memory_mb"])
                fields.append("memory_mb")
            if gpu.uuid != info["uuid"]:
                gpu.uuid = info["uuid"]
                fields.append("uuid")
        if fields:
            try:
                with transaction.atomic():
                    gpu.save(update_fields=fields)
            except IntegrityError:  # a uuid another GPU row already has: keep ours
                log.warning(
                    "node %s GPU %d reports uuid %s, already taken; kept %s",
                    node.name,
                    gpu.index,
                    info and info.get("uuid"),
                    gpu.uuid,
                )


def _missing_twice(node: Node, job_ids: list[int], now: datetime) -> list[int]:
    """Of the jobs a heartbeat did not list, those missing from every heartbeat for at least one
    heartbeat interval (and from two heartbeats at least).

    One miss is not enough: the agent sends its heartbeat before delivering the ``finished`` of a
    job that has just ended, and a delivery that failed is retried after a backoff while
    heartbeats go on (docs/AGENT.md §2–3). The first miss is remembered in the cache for three
    intervals (with several web processes the cache must be shared, e.g. Redis via
    ``CACHE_URL``, or a miss seen by another process is counted later). With the cache
    unreachable, none (logged).
    """
    key = f"sharewise:missing:{node.pk}"
    now_s = now.timestamp()
    interval = heartbeat_interval_s()
    try:
        before: dict[int, float] = cache.get(key) or {}
        first = {j: before.get(j, now_s) for j in job_ids}
        cache.set(key, first, timeout=max(1, round(3 * interval)))
    except CACHE_ERRORS as exc:
        # Without the cache no miss can be confirmed: requeue nothing now (a later heartbeat, or
        # another web process, will), rather than let the whole heartbeat fail and the node look
        # silent.
        log.warning("node %s: missing jobs %s not checked, cache unreachable (%s)", node.name, job_ids, exc)
        return []
    return [j for j in job_ids if j in before and now_s - first[j] >= interval]


def _heartbeat_progress(rows: dict[int, dict[str, Any]]) -> None:
    """Advance each job's progress to what the heartbeat reports (``{job id: running row}``, jobs
    placed on the node), keeping the maximum; a row of an old run (generation below the floor)
    or of a gang (its progress comes from events, per node) changes nothing. A fixed number of
    queries for all of them, the jobs that advanced in one bulk update: a heartbeat lists every
    job of its node, every interval."""
    if not rows:
        return
    facts = jobs_placements(rows)  # windows and the nodes holding each job, from one read of the rows
    current = []
    for j, row in rows.items():
        own = facts.get(j)
        window = own.window() if own is not None else None
        if own is None or window is None or int(row.get("generation", -1)) < window[0]:
            continue  # never placed, or an old run's row
        if len(own.active_nodes()) <= 1:  # a gang's progress comes from its events, per node
            current.append(j)
    advanced = []
    for job in _progress_rows(current):
        done = float(rows[job.pk].get("iterations_done") or 0.0)
        if done > job.iterations_done:
            advance_progress(job, done)
            advanced.append(job)
    write_progress(advanced)


def _progress_rows(job_ids: list[int]) -> list[Job]:
    """Jobs ``job_ids`` with only their id, ``iterations`` and ``iterations_done`` loaded (the
    ORM's ``only()``), read and locked by one plain statement, by ascending key (docs/LOCKS.md;
    ``FOR UPDATE`` where the backend has it): the progress written is then the maximum of the
    heartbeat's and the one stored, even against an event of the job written meanwhile."""
    if not job_ids:
        return []
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    q = connection.ops.quote_name
    j = meta(Job)
    fields = tuple(j.get_field(f) for f in ("id", "iterations", "iterations_done"))
    sql = (
        f"SELECT {', '.join(q(f.column) for f in fields)} FROM {q(j.db_table)} "
        f"WHERE {q(j.pk.column)} IN ({plain_rows.marks(len(job_ids))}) ORDER BY {q(j.pk.column)}{lock}"
    )
    names = [f.attname for f in fields]
    return [Job.from_db(connection.alias, names, row) for row in plain_rows.select(sql, job_ids, fields)]


def write_progress(jobs: Sequence[Job]) -> None:
    """Write each of ``jobs``' ``iterations_done`` in one UPDATE (none for no job): what
    ``bulk_update(jobs, ["iterations_done"])`` writes, a ``CASE`` on the key, but as plain SQL —
    the ORM built and compiled a ``When`` per job, about 4 ms of a heartbeat's 13 ms of CPU with 20
    jobs (PERFORMANCE.md §10)."""
    if not jobs:
        return
    quote = connection.ops.quote_name
    table, key = quote(meta(Job).db_table), quote(meta(Job).pk.column)
    column = quote(meta(Job).get_field("iterations_done").column)
    cases = " ".join(["WHEN %s THEN %s"] * len(jobs))
    marks = ", ".join(["%s"] * len(jobs))
    params: list[Any] = [v for job in jobs for v in (job.pk, float(job.iterations_done))]
    params += [job.pk for job in jobs]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {column} = CASE {key} {cases} END WHERE {key} IN ({marks})", params
        )


def _stop_messages(node: Node, reported: dict[int, int]) -> list[Message]:
    """A ``stop`` for each job ``node`` runs but should not (``{job id: generation it reported}``),
    with a generation above both the agent's and every one the server sent for the job, written on
    this node's newest rows of the job (so the generation rule of AGENT.md §1–2 holds).

    The work is a fixed number of queries for all of them, plus one update per job that has rows
    on this node: a heartbeat listing made-up ids costs little (the list is bounded too).
    """
    if not reported:
        return []
    latest = next_generations(reported)  # 1 + the highest generation of each job's rows (1: none)
    here = dict(
        Placement.objects.filter(job_id__in=list(reported), gpu__node=node, active=False)
        .order_by()
        .values("job_id")
        .annotate(g=Max("generation"))
        .values_list("job_id", "g")
    )
    messages: list[Message] = []
    for job_id in sorted(reported):
        generation = max(latest[job_id], reported[job_id] + 1)
        if job_id in here:
            Placement.objects.filter(
                job_id=job_id, gpu__node=node, active=False, generation=here[job_id]
            ).update(generation=generation)
        messages.extend(stop_messages([node.name], job_id, generation))
    return messages


def forget_cluster_facts() -> None:
    """Forget the cluster bounds cached for submissions (:func:`cluster.cluster_facts.forget`):
    a node's status changed by ``update()``, which sends no signal."""
    from cluster.cluster_facts import forget  # imported late: cluster_facts imports the service

    forget()
