"""The server's side of the node-agent contract (docs/AGENT.md §2–3): job events, heartbeats,
reconciliation and the heartbeat timeout.

- :func:`record_event` — a ``started`` / ``progress`` / ``finished`` / ``failed`` / ``stopped``
  event of one job from one node. Accepted iff ``floor ≤ generation ≤ latest`` (AGENT.md §2,
  :func:`generation_window`), idempotent under at-least-once delivery.
- :func:`record_heartbeat` — the node's time, its GPUs' health and memory, and the
  reconciliation of what it runs against what the database places on it.
- :func:`check_heartbeats` — nodes silent for longer than ``SHAREWISE_HEARTBEAT_TIMEOUT_S`` become
  ``unhealthy`` and their jobs go back to pending with the progress last reported
  (ARCHITECTURE.md, data flow step 8; TESTING.md invariants 6 and 9).

A job leaving its GPUs (finished, failed, requeued) changes the co-location of the jobs that
shared them: :func:`refresh_partners` sends those an ``update`` with their new slowdown ξ
(MODEL.md §2), under the round lease so it never interleaves with a round.

Units: seconds (s), MB, iterations. Errors: :class:`AgentError` carries the HTTP status.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from cluster.models import GPU, Job, JobEvent, Node, Placement

log = logging.getLogger(__name__)

#: Seconds between an agent's heartbeats (setting ``SHAREWISE_HEARTBEAT_INTERVAL_S``; the agent's
#: ``--heartbeat-s`` default, AGENT.md §3).
DEFAULT_HEARTBEAT_INTERVAL_S = 5.0
#: Longest wait for the round lease before a partner update is given up (s) **(ours)**.
PARTNER_LEASE_WAIT_S = 10.0
EVENT_KINDS = ("started", "progress", "finished", "failed", "stopped")
TERMINAL = (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED)


class AgentError(Exception):
    """A report the server refuses; ``status`` is the HTTP status (403, 404, 409)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """One job event as validated by the API (AGENT.md §2): ``iterations_done`` (iterations),
    ``iter_time_s`` (s, measured, ``None`` before the first measurement)."""

    generation: int
    event: str
    iterations_done: float
    iter_time_s: float | None = None
    reason: str = ""


def heartbeat_interval_s() -> float:
    """Seconds between heartbeats of an agent (``SHAREWISE_HEARTBEAT_INTERVAL_S``, default 5)."""
    from scheduling.services import setting

    return float(setting("SHAREWISE_HEARTBEAT_INTERVAL_S", DEFAULT_HEARTBEAT_INTERVAL_S))


def node_for_token(raw: str) -> Node | None:
    """The node whose agent token is ``raw`` (only its SHA-256 is stored), or ``None``."""
    from cluster.models import hash_token

    node = Node.objects.filter(agent_token_hash=hash_token(raw)).first()
    return node if node is not None and node.check_agent_token(raw) else None


def write_token_file(path: str | Path, tokens: dict[str, str]) -> None:
    """Write node tokens as the agent's ``--token-file`` (JSON ``{node: token}``), readable by the
    owner only, atomically (a rename). Raises ``OSError`` when the folder cannot be written or
    ``path`` cannot be replaced (e.g. it is a folder); the ``<path>.tmp`` file, which holds the
    tokens, is removed on every failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(tokens, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------------------------ generations


def generation_window(job_id: int) -> tuple[int, int] | None:
    """``(floor, latest)`` of AGENT.md §2 for a job, ``None`` if no message was ever sent for it.

    ``latest``: the highest generation of any of its placement rows (every message sent raises
    it). ``floor``: the last ``start`` or ``stop`` sent — while the job holds GPUs, the generation
    of its latest ``placed`` event (updates do not raise the floor); otherwise ``latest`` (its
    rows carry the stop's generation, or the last one sent before it ended).
    """
    latest = Placement.objects.filter(job_id=job_id).aggregate(g=Max("generation"))["g"]
    if latest is None:
        return None
    if not Placement.objects.filter(job_id=job_id, active=True).exists():
        return latest, latest
    placed = (
        JobEvent.objects.filter(job_id=job_id, kind=JobEvent.Kind.PLACED)
        .order_by("-id")
        .values_list("data", flat=True)
        .first()
    ) or {}
    floor = placed.get("generation", latest) if isinstance(placed, dict) else latest
    return min(int(floor), latest), latest


def _job_nodes(job_id: int) -> set[str]:
    """Names of the nodes holding the job's active placements."""
    return set(Placement.objects.filter(job_id=job_id, active=True).values_list("gpu__node__name", flat=True))


def _reported_by_node(job_id: int, floor: int, event: str | None = None) -> dict[str, float]:
    """Per node: the largest ``iterations_done`` the job's agent events of generation ≥ ``floor``
    reported (only events of kind ``event`` when given)."""
    best: dict[str, float] = {}
    for data in JobEvent.objects.filter(
        job_id=job_id, data__generation__gte=floor, data__has_key="node"
    ).values_list("data", flat=True):
        if event is not None and data.get("event") != event:
            continue
        node = data["node"]
        best[node] = max(best.get(node, 0.0), float(data.get("iterations_done") or 0.0))
    return best


# ------------------------------------------------------------------------------------- job events


def record_event(node: Node, job_id: int, event: AgentEvent, now: datetime | None = None) -> dict[str, Any]:
    """Apply one agent event for job ``job_id`` reported by ``node`` (AGENT.md §2).

    Returns ``{"job_id", "status", "accepted"}`` (``accepted`` False: a harmless repeat, 200).
    Raises :class:`AgentError`: 404 unknown job; 403 the job was never placed on ``node`` (a node
    reports only its own jobs); 409 ``stale generation`` outside ``[floor, latest]``.

    What an accepted event does (a gang spanning nodes counts per node): ``progress`` and
    ``started`` keep the largest ``iterations_done`` (a gang: the smallest over its nodes) and the
    measured iteration time; ``finished`` from the last node of the gang → ``succeeded``;
    ``failed`` → ``failed`` and a ``stop`` to the gang's other nodes; ``stopped`` while the job
    still holds this node's GPUs (the agent shut down) → back to ``pending`` with its progress.
    A job leaving its GPUs frees them for the next round, which is requested.
    """
    now = now or timezone.now()
    partners: set[int] = set()
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            raise AgentError(404, f"job {job_id} does not exist")
        if not Placement.objects.filter(job_id=job_id, gpu__node=node).exists():
            raise AgentError(403, f"job {job_id} was never placed on node {node.name}")
        window = generation_window(job_id)
        assert window is not None  # the job has placement rows (checked above)
        floor, latest = window
        if event.generation > latest or (
            event.generation < floor and not (job.status in TERMINAL and event.event != "progress")
        ):
            raise AgentError(409, "stale generation")
        data = {
            "node": node.name,
            "generation": event.generation,
            "event": event.event,
            "iterations_done": event.iterations_done,
            "iter_time_s": event.iter_time_s,
        }
        if job.status in TERMINAL:
            return _answer(job, accepted=False)
        if event.iter_time_s is not None:
            job.measured_iteration_time_s = event.iter_time_s
        if job.status == Job.Status.PENDING or node.name not in _job_nodes(job_id):
            # The job was preempted or requeued, and this is the agent's acknowledgment (or a
            # late report): keep the progress, change nothing else.
            _advance(job, event.iterations_done)
            job.save(update_fields=["iterations_done", "measured_iteration_time_s"])
            return _answer(job, accepted=event.event == "stopped")
        accepted = True
        if event.event in ("started", "progress"):
            accepted = _progress(job, node, event, floor, data, now)
        elif event.event == "finished":
            accepted, partners = _finished(job, node, event, floor, data, now)
        elif event.event == "failed":
            if len(_job_nodes(job_id)) <= 1:
                _advance(job, event.iterations_done)
            partners = release(
                job,
                now,
                Job.Status.FAILED,
                JobEvent.Kind.FAILED,
                event.reason or f"failed on node {node.name}",
                data,
            )
        else:  # stopped by the agent itself: it shut down, or lost the GPUs
            if len(_job_nodes(job_id)) <= 1:
                _advance(job, event.iterations_done)
            partners = release(
                job,
                now,
                Job.Status.PENDING,
                JobEvent.Kind.REQUEUED,
                f"stopped on node {node.name}: {event.reason or 'no reason given'}",
                data,
            )
        if job.status != Job.Status.RUNNING:
            _after_release(job.pk, partners)
    return _answer(job, accepted=accepted)


def _answer(job: Job, accepted: bool) -> dict[str, Any]:
    return {"job_id": job.pk, "status": job.status, "accepted": accepted}


def _advance(job: Job, iterations_done: float) -> None:
    job.iterations_done = min(float(job.iterations), max(job.iterations_done, float(iterations_done)))


def _progress(
    job: Job, node: Node, event: AgentEvent, floor: int, data: dict[str, Any], now: datetime
) -> bool:
    if (
        event.event == "started"
        and JobEvent.objects.filter(
            job=job, kind=JobEvent.Kind.STARTED, data__node=node.name, data__generation=event.generation
        ).exists()
    ):
        return False  # a repeated started (a re-sent start re-confirms it): nothing new
    kind = JobEvent.Kind.STARTED if event.event == "started" else JobEvent.Kind.PROGRESS
    JobEvent.objects.create(job=job, kind=kind, at=now, data=data)
    nodes = _job_nodes(job.pk)
    if len(nodes) <= 1:
        _advance(job, event.iterations_done)
    else:  # a gang's progress is that of its slowest node (AGENT.md §1, "Gangs across nodes")
        reported = _reported_by_node(job.pk, floor)
        if nodes <= reported.keys():
            _advance(job, min(reported[n] for n in nodes))
    job.save(update_fields=["iterations_done", "measured_iteration_time_s"])
    return True


def _finished(
    job: Job, node: Node, event: AgentEvent, floor: int, data: dict[str, Any], now: datetime
) -> tuple[bool, set[int]]:
    nodes = _job_nodes(job.pk)
    if len(nodes) > 1:
        done = set(_reported_by_node(job.pk, floor, "finished"))
        if node.name in done:
            return False, set()
        if not nodes <= done | {node.name}:  # other nodes of the gang are still running
            JobEvent.objects.create(
                job=job,
                kind=JobEvent.Kind.PROGRESS,
                at=now,
                data=data,
                message=f"finished on node {node.name}",
            )
            job.save(update_fields=["measured_iteration_time_s"])
            return True, set()
    job.iterations_done = float(job.iterations)
    return True, release(job, now, Job.Status.SUCCEEDED, JobEvent.Kind.SUCCEEDED, "", data)


def release(
    job: Job, now: datetime, status: str, kind: str, message: str, data: dict[str, Any] | None = None
) -> set[int]:
    """End the job's active placements and set its ``status`` (``succeeded``/``failed``: finished
    now; ``pending``: back to the queue with its progress and, in the same transaction, the
    run's service ``gpus × (now − start of this run)`` added to ``attained_gpu_s``
    (``scheduling.services.attained_after_run``)), appending a ``kind`` event.

    Must run inside a transaction. Returns the ids of the jobs that shared its GPUs (their ξ
    changes). For a failed or requeued job, the agents of its nodes get a ``stop`` after commit
    (``scheduling.services.stop_job``; harmless where it no longer runs).
    """
    from scheduling.services import attained_after_run, stop_job

    rows = Placement.objects.filter(job=job, active=True)
    gpu_ids = list(rows.values_list("gpu_id", flat=True))
    partners = set(
        Placement.objects.filter(active=True, gpu_id__in=gpu_ids)
        .exclude(job=job)
        .values_list("job_id", flat=True)
    )
    if status == Job.Status.PENDING:  # the run's service, read from its placements before they end
        Job.objects.filter(pk=job.pk).update(attained_gpu_s=attained_after_run(now))
        job.refresh_from_db(fields=["attained_gpu_s"])
    rows.update(active=False, ended_at=now)
    job.status = status
    fields = ["status", "iterations_done", "measured_iteration_time_s"]
    if status in TERMINAL:
        job.finished_at = now
        fields.append("finished_at")
    if status == Job.Status.FAILED:
        job.failure_reason = message
        fields.append("failure_reason")
    job.save(update_fields=fields)
    JobEvent.objects.create(
        job=job,
        kind=kind,
        at=now,
        message=message,
        data={**(data or {}), "iterations_done": job.iterations_done},
    )
    if status != Job.Status.SUCCEEDED:
        stop_job(job.pk)
    return partners


def _after_release(job_id: int, partners: set[int]) -> None:
    """After commit: partners' new ξ, and a round for the freed GPUs (debounced, broker only)."""
    from scheduling.tasks import request_round

    if partners:
        ids = sorted(partners)
        transaction.on_commit(lambda: refresh_partners(ids), robust=True)
    request_round()


def refresh_partners(job_ids: Sequence[int]) -> int:
    """Send each still-running job of ``job_ids`` an ``update`` with its current slowdown ξ
    (its GPU partner left; AGENT.md §1, MODEL.md §2), with a new generation written on its rows.

    Takes the round lease (waiting up to :data:`PARTNER_LEASE_WAIT_S`) so that no round
    interleaves; must be called outside a transaction on PostgreSQL (the lease's rule). Returns
    the number of messages sent (0 when the lease stayed busy: logged; the job then keeps its old
    pace until its next placement change).
    """
    from scheduling import services
    from scheduling.profiles import load_default_profile

    lease = services.RoundLease()
    deadline = time.monotonic() + PARTNER_LEASE_WAIT_S
    while not lease.acquire():
        if time.monotonic() > deadline:
            log.warning("partner update of jobs %s skipped: the round lease stayed busy", list(job_ids))
            return 0
        time.sleep(0.02)
    try:
        with transaction.atomic():
            profile = load_default_profile()
            state = services.load_state(profile=profile)
            occupied = {
                g: {slot: (job, sub) for job, slot, sub in rows} for g, rows in state.residents.items()
            }
            job_gpus: dict[int, list[int]] = defaultdict(list)
            for g, slots in occupied.items():
                for job, _ in slots.values():
                    job_gpus[job].append(g)
            ids = [j for j in job_ids if j in job_gpus and j in state.jobs]
            generations = services._next_generations(ids)
            commands = dict(Job.objects.filter(pk__in=ids).values_list("pk", "command"))
            messages: list[dict[str, Any]] = []
            for j in ids:
                Placement.objects.filter(job_id=j, active=True).update(generation=generations[j])
                messages.extend(
                    services._messages(
                        state,
                        profile,
                        occupied,
                        j,
                        sorted(job_gpus[j]),
                        generations[j],
                        "update",
                        commands.get(j, ""),
                    )
                )
            if messages:
                transaction.on_commit(lambda: services.get_dispatcher()(messages), robust=True)
    finally:
        lease.release()
    return len(messages)


def cancel_job(job: Job, by: str = "") -> bool:
    """Cancel ``job`` (:meth:`Job.cancel`) and, if this call cancelled it, tell its nodes: a
    ``stop`` to each (``scheduling.services.stop_job``), an ``update`` to the jobs that shared its
    GPUs, a round for the freed GPUs. Returns whether this call cancelled it."""
    from scheduling.services import stop_job

    gpu_ids = list(Placement.objects.filter(job=job, active=True).values_list("gpu_id", flat=True))
    partners = set(
        Placement.objects.filter(active=True, gpu_id__in=gpu_ids)
        .exclude(job=job)
        .values_list("job_id", flat=True)
    )
    if not job.cancel(by=by):
        return False
    with transaction.atomic():
        stop_job(job.pk)
        _after_release(job.pk, partners)
    return True


# ------------------------------------------------------------------------------------- heartbeats


def requeue(job_ids: Iterable[int], now: datetime, reason: str) -> list[int]:
    """Put running jobs back to pending with the progress last reported (their placements end, a
    ``requeued`` event, a ``stop`` to their nodes, an ``update`` to their partners). Returns the
    ids requeued (jobs no longer running are skipped)."""
    done: list[int] = []
    partners: set[int] = set()
    with transaction.atomic():
        for job in Job.objects.select_for_update().filter(pk__in=list(job_ids), status=Job.Status.RUNNING):
            partners |= release(job, now, Job.Status.PENDING, JobEvent.Kind.REQUEUED, reason)
            done.append(job.pk)
        if done:
            _after_release(done[0], partners - set(done))
    return done


def check_heartbeats(now: datetime | None = None) -> dict[str, list[int]]:
    """Mark ``ready`` nodes whose last heartbeat is older than ``SHAREWISE_HEARTBEAT_TIMEOUT_S``
    as ``unhealthy`` (no new work) and requeue their running jobs, progress kept.

    Nodes never heard from are left alone (an admin registered them; the embedded mode may
    never send heartbeats). Returns ``{node name: [requeued job ids]}`` for the nodes marked
    now. Called before each round (the demo, ``run_scheduler``) and by Celery beat
    (``sharewise.check_heartbeats``).
    """
    from scheduling.services import heartbeat_timeout_s

    now = now or timezone.now()
    cutoff = now - timedelta(seconds=heartbeat_timeout_s())
    marked: dict[str, list[int]] = {}
    for node in Node.objects.filter(status=Node.Status.READY, last_heartbeat__lt=cutoff):
        with transaction.atomic():
            changed = Node.objects.filter(
                pk=node.pk, status=Node.Status.READY, last_heartbeat__lt=cutoff
            ).update(status=Node.Status.UNHEALTHY)
            if not changed:
                continue
            silent = (now - node.last_heartbeat).total_seconds()
            jobs = set(Placement.objects.filter(active=True, gpu__node=node).values_list("job_id", flat=True))
            marked[node.name] = requeue(
                sorted(jobs), now, f"node {node.name} silent for {silent:.0f} s (heartbeat timeout)"
            )
        log.warning(
            "node %s marked unhealthy (no heartbeat for %.0f s); requeued jobs %s",
            node.name,
            silent,
            marked[node.name],
        )
    return marked


def record_heartbeat(
    node: Node, gpus: Sequence[dict[str, Any]], running: Sequence[dict[str, Any]], now: datetime | None = None
) -> dict[str, Any]:
    """Apply one heartbeat of ``node`` (AGENT.md §3): record the time (an ``unhealthy`` node is
    ``ready`` again), update its GPUs, reconcile.

    ``gpus``: ``[{"index", "uuid", "memory_mb", "healthy"}]`` — a GPU absent from it, or reported
    unhealthy, takes no new work (a blip to zero GPUs does not stop running jobs); ``memory_mb``
    and an NVML uuid (``GPU-…``) replace the stored ones. ``running``: ``[{"job_id",
    "generation", "iterations_done"}]``. Reconciliation: a job placed here more than one heartbeat
    interval ago but missing from the heartbeats for at least one interval is requeued with its
    progress (the agent lost it); a reported job the database does not place here gets a
    ``stop`` with a new generation; progress keeps the maximum. Returns ``{"stopped": [job ids],
    "requeued": [job ids]}``.
    """
    now = now or timezone.now()
    stops: list[dict[str, Any]] = []
    with transaction.atomic():
        Node.objects.filter(pk=node.pk).update(last_heartbeat=now)
        Node.objects.filter(pk=node.pk, status=Node.Status.UNHEALTHY).update(status=Node.Status.READY)
        _update_gpus(node, gpus)
        reported = {int(r["job_id"]): r for r in running}
        expected: dict[int, datetime] = {}
        placed_here = Placement.objects.filter(active=True, gpu__node=node, job__status=Job.Status.RUNNING)
        for job_id, created in placed_here.values_list("job_id", "created_at"):
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
        requeued = requeue(missing, now, f"node {node.name} no longer runs it (agent restarted or lost it)")
        for job_id, row in reported.items():
            if job_id in expected:
                _heartbeat_progress(job_id, row)
            else:
                stops.append(_stop_message(node, job_id, int(row.get("generation", 0))))
        if stops:
            from scheduling.services import get_dispatcher

            transaction.on_commit(lambda: get_dispatcher()(stops), robust=True)
    return {"stopped": [m["job_id"] for m in stops], "requeued": requeued}


def _update_gpus(node: Node, reported: Sequence[dict[str, Any]]) -> None:
    by_index = {int(g["index"]): g for g in reported}
    for gpu in GPU.objects.filter(node=node):
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
    ``CACHE_URL``, or a miss seen by another process is counted later).
    """
    key = f"sharewise:missing:{node.pk}"
    before: dict[int, float] = cache.get(key) or {}
    now_s = now.timestamp()
    first = {j: before.get(j, now_s) for j in job_ids}
    interval = heartbeat_interval_s()
    cache.set(key, first, timeout=max(1, round(3 * interval)))
    return [j for j in job_ids if j in before and now_s - first[j] >= interval]


def _heartbeat_progress(job_id: int, row: dict[str, Any]) -> None:
    window = generation_window(job_id)
    if window is None or int(row.get("generation", -1)) < window[0] or len(_job_nodes(job_id)) > 1:
        return  # an old run's count, or a gang (its progress comes from events, per node)
    done = float(row.get("iterations_done") or 0.0)
    job = Job.objects.get(pk=job_id)
    if done > job.iterations_done:
        _advance(job, done)
        job.save(update_fields=["iterations_done"])


def _stop_message(node: Node, job_id: int, reported_generation: int) -> dict[str, Any]:
    """A ``stop`` for a job ``node`` runs but should not, with a generation above both the
    agent's and every one the server sent for the job (written on this node's rows of the job)."""
    latest = Placement.objects.filter(job_id=job_id).aggregate(g=Max("generation"))["g"] or 0
    generation = max(latest, reported_generation) + 1
    here = Placement.objects.filter(job_id=job_id, gpu__node=node, active=False)
    newest = here.aggregate(g=Max("generation"))["g"]
    if newest is not None:
        here.filter(generation=newest).update(generation=generation)
    return {"node": node.name, "job_id": job_id, "generation": generation, "action": "stop"}
