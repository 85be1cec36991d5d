"""Messages to the node agents: built through the wire protocol of :mod:`agent.messages`, sent
after commit by the dispatcher.

One ``sharewise.apply_placement`` message per (job, node) change (docs/AGENT.md §1), sent by
the transport of setting ``SHAREWISE_AGENT_TRANSPORT``: ``pull`` (the default without
``REDIS_URL``) records it in the database for the node's agent to long-poll
(:mod:`scheduling.service.orders`, AGENT.md §1a); ``push`` sends it with Celery to queue
``node.<name>`` when a broker is configured, else to the in-process subscribers
(:func:`subscribe`; the demo's emulated agents). :func:`set_dispatcher` overrides the choice
(tests, benchmarks).

Units: seconds (s), iterations.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from agent.messages import TASK_NAME, placement_kwargs, queue_name, stop_kwargs
from scheduling.core import types as core
from scheduling.service.orders import pull_dispatch
from scheduling.service.snapshot import ClusterState

log = logging.getLogger(__name__)

Message = dict[str, Any]
"""One ``sharewise.apply_placement`` payload (AGENT.md §1), JSON-serialisable."""
Dispatcher = Callable[[Sequence[Message]], None]
"""Sends a batch of messages (after the round's commit)."""
#: Per core GPU id: ``{slot: (job pk, sub-batch)}`` of its placements (ClusterState.occupancy).
Occupancy = dict[int, dict[int, tuple[int, int]]]

_subscribers: list[Callable[[Message], None]] = []
_dispatcher_override: Dispatcher | None = None


# ---------------------------------------------------------------------------------- building


def slowdown_of(
    profile: core.Profile,
    jobs: dict[int, core.Job],
    job_pk: int,
    sub_batch: int,
    partners: Iterable[tuple[int, int]],
) -> float:
    """ξ of job ``job_pk`` at ``sub_batch`` given its partner ``(job pk, sub-batch)`` on each GPU
    it shares: the largest ``profile.slowdown(...)[0]`` (a gang runs at the pace of its slowest
    GPU, MODEL.md §2); 1 when it shares none."""
    job = jobs[job_pk]
    xi = 1.0
    for partner, partner_sub in partners:
        xi = max(xi, profile.slowdown(job, sub_batch, jobs[partner], partner_sub)[0])
    return xi


@dataclass(frozen=True, slots=True)
class Colocation:
    """A running job's co-location on its GPUs, as a message describes it.

    ``sub_batch``: the job's micro-batch; ``partners``: per core GPU id the job shares, ``(partner
    job pk, partner sub-batch, ξ of the job beside it)`` from the profile; ``slowdown``: the job's
    pace, the largest of those ξ (1 alone; MODEL.md §2)."""

    sub_batch: int
    partners: dict[int, tuple[int, int, float]]
    slowdown: float


def colocation_of(
    state: ClusterState, profile: core.Profile, occupied: Occupancy, job_pk: int, gpu_ids: Iterable[int]
) -> Colocation:
    """The :class:`Colocation` of job ``job_pk`` on core GPUs ``gpu_ids`` of ``occupied``."""
    job = state.jobs[job_pk]
    gpus = list(gpu_ids)
    sub_batch = next(sub for g in gpus for j, sub in occupied[g].values() if j == job_pk)
    partners: dict[int, tuple[int, int, float]] = {}
    for g in gpus:
        for j, sub in occupied[g].values():
            if j != job_pk:
                partners[g] = (j, sub, profile.slowdown(job, sub_batch, state.jobs[j], sub)[0])
    return Colocation(sub_batch, partners, max([1.0, *(xi for _, _, xi in partners.values())]))


def stop_messages(nodes: Iterable[str], job_id: int, generation: int) -> list[Message]:
    """One ``stop`` of ``job_id`` at ``generation`` per node of ``nodes`` (AGENT.md §1)."""
    return [stop_kwargs(node, job_id, generation) for node in nodes]


def placement_messages(
    state: ClusterState,
    profile: core.Profile,
    occupied: Occupancy,
    job_pk: int,
    gpu_ids: Iterable[int],
    generation: int,
    action: Literal["start", "stop", "update"],
    command: str = "",
    colocation: Colocation | None = None,
) -> list[Message]:
    """One message per node holding some of core GPUs ``gpu_ids`` (AGENT.md §1).

    A ``start`` or ``update`` carries the job's sub-batch and slowdown ξ on ``occupied`` (the
    placements after the round's changes; ``colocation`` when already computed), the model and
    sub-batch of its partners, its iteration time at that sub-batch (s) and its progress
    (iterations); a ``stop`` only the generation.
    """
    by_node: dict[str, list[int]] = defaultdict(list)
    for g in gpu_ids:
        node, index = state.node_and_index(g)
        by_node[node].append(index)
    if action == "stop":
        return stop_messages(by_node, job_pk, generation)
    job = state.jobs[job_pk]
    colo = colocation or colocation_of(state, profile, occupied, job_pk, gpu_ids)
    sub_batch = colo.sub_batch
    partners = sorted({(state.jobs[j].model, sub) for j, sub, _ in colo.partners.values()})
    return [
        placement_kwargs(
            node,
            job_pk,
            sorted(indices),
            generation=generation,
            action=action,
            sub_batch=sub_batch,
            accum_steps=job.batch_size // sub_batch,
            batch_size=job.batch_size,
            iterations=job.iterations,
            iterations_done=min(job.iterations_done, job.iterations),
            iter_time_s=profile.iter_time_s(job, sub_batch),
            slowdown=colo.slowdown,
            command=command,
            model=job.model,
            partners=partners,
        )
        for node, indices in by_node.items()
    ]


# ---------------------------------------------------------------------------------- sending


def subscribe(callback: Callable[[Message], None]) -> None:
    """Receive every placement message in-process (no broker; e.g. the demo's emulated agents)."""
    if callback not in _subscribers:
        _subscribers.append(callback)


def unsubscribe(callback: Callable[[Message], None]) -> None:
    """Stop sending placement messages to ``callback`` (no error if it was not subscribed)."""
    if callback in _subscribers:
        _subscribers.remove(callback)


def local_dispatch(messages: Sequence[Message]) -> None:
    """Hand each message to every in-process subscriber, in order; a failing subscriber is logged
    and does not stop the others (heartbeat reconciliation repairs what it missed)."""
    for message in messages:
        for callback in list(_subscribers):
            try:
                callback(message)
            except Exception:
                log.exception("placement subscriber %r failed on job %s", callback, message.get("job_id"))


def celery_dispatch(messages: Sequence[Message]) -> None:
    """Send each message as task ``sharewise.apply_placement`` to queue ``node.<node>`` (JSON),
    over one broker connection, batched (kombu's ``Producer.batch``: one Redis pipeline instead of
    a round trip per message)."""
    from config.celery import app

    if not messages:
        return
    with app.producer_or_acquire() as producer, producer.batch():
        for message in messages:
            # kwargsrepr given: Celery would otherwise build a safe repr of every payload for logs.
            label = f"{{job {message['job_id']} {message['action']} g{message['generation']}}}"
            app.send_task(
                TASK_NAME,
                kwargs=message,
                queue=queue_name(message["node"]),
                serializer="json",
                producer=producer,
                argsrepr="()",
                kwargsrepr=label,
            )


def broker_configured() -> bool:
    """Whether a real Celery broker is configured (not the in-memory embedded default)."""
    url = str(settings.CELERY_BROKER_URL or "")
    return bool(url) and not url.startswith("memory://") and not settings.CELERY_TASK_ALWAYS_EAGER


#: The values of setting ``SHAREWISE_AGENT_TRANSPORT``.
TRANSPORTS = ("pull", "push")


def agent_transport() -> str:
    """How placements reach the agents: setting ``SHAREWISE_AGENT_TRANSPORT`` (``pull`` or
    ``push``; default ``pull`` without ``REDIS_URL``, ``push`` with it). Raises
    ``ImproperlyConfigured`` for another value."""
    value = str(settings.SHAREWISE_AGENT_TRANSPORT).strip().lower()
    if value not in TRANSPORTS:
        raise ImproperlyConfigured(f"SHAREWISE_AGENT_TRANSPORT must be pull or push, got {value!r}")
    return value


def set_dispatcher(dispatcher: Dispatcher | None) -> None:
    """Use ``dispatcher`` for every later round (``None``: back to the automatic choice)."""
    global _dispatcher_override
    _dispatcher_override = dispatcher


def get_dispatcher() -> Dispatcher:
    """The override set by :func:`set_dispatcher`; else, by :func:`agent_transport`, the database
    for the agents to pull (``pull``), or Celery with a broker and in-process without (``push``)."""
    if _dispatcher_override is not None:
        return _dispatcher_override
    if agent_transport() == "pull":
        return pull_dispatch
    return celery_dispatch if broker_configured() else local_dispatch


def dispatch_after_commit(messages: Sequence[Message]) -> None:
    """Send ``messages`` with the dispatcher once the current transaction commits (at once in
    autocommit); a failing dispatcher is logged, never undoes the commit."""
    if messages:
        transaction.on_commit(lambda: get_dispatcher()(messages), robust=True)
