"""The Celery side: a small Celery app whose one task hands placements to the agents.

The server sends ``send_task("sharewise.apply_placement", kwargs=..., queue="node.<NAME>")``
(docs/AGENT.md); a worker started by :func:`run_worker` consumes the queues of the nodes this
process serves and calls :meth:`agent.core.Agent.apply`. The task is thin on purpose: all the
logic is in the agent, which unit tests drive without a broker.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from typing import Any

from celery import Celery

from agent.core import Agent, route
from agent.messages import TASK_NAME, queue_name

log = logging.getLogger(__name__)


def make_app(broker_url: str) -> Celery:
    """A Celery app for the agent on ``broker_url`` (``redis://…``; ``memory://`` in tests)."""
    app = Celery("sharewise-agent", broker=broker_url)
    app.conf.update(
        # Placements are plain JSON objects (docs/AGENT.md), never pickles from the network.
        task_serializer="json",
        accept_content=["json"],
        # Ack after apply: a crash mid-apply redelivers the message, and apply is idempotent.
        task_acks_late=True,
        # Take one placement at a time: a node's messages are applied in the order received.
        worker_prefetch_multiplier=1,
        # Nobody reads the task's result; the agent reports over REST instead.
        task_ignore_result=True,
        # The broker may come up after the agent (docker-compose); keep trying.
        broker_connection_retry_on_startup=True,
        # The agent configures logging itself (--log-level).
        worker_hijack_root_logger=False,
    )
    return app


def register_apply_task(app: Celery, agents: Mapping[str, Agent]) -> Any:
    """Register ``sharewise.apply_placement`` on ``app``, dispatching by the message's ``node``."""

    @app.task(name=TASK_NAME, shared=False)  # never registered on other Celery apps of the process
    def apply_placement(**kwargs: Any) -> bool:
        """Apply one placement (kwargs: docs/AGENT.md); ``False`` when ignored."""
        return route(agents, kwargs)

    return apply_placement


def run_worker(app: Celery, nodes: list[str], log_level: str = "INFO") -> None:
    """Consume the queues of ``nodes`` in this thread (the main one) until the worker is told to stop.

    One process, one thread: ``--pool=solo``; gossip, mingle and worker heartbeats are off
    because agents do not take part in the cluster of Celery workers.
    """
    app.worker_main(
        [
            "worker",
            "--pool=solo",
            f"--queues={','.join(queue_name(n) for n in nodes)}",
            f"--hostname=sharewise-agent-{nodes[0]}@{socket.gethostname()}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            f"--loglevel={log_level}",
        ]
    )


def stop_worker() -> None:
    """Ask :func:`run_worker`'s worker, from any thread, for the warm shutdown SIGTERM would give
    (it finishes the task in hand); asked before it started, it stops as soon as it has."""
    from celery.worker import state

    state.should_stop = 0  # EX_OK: what Celery's own SIGTERM handler sets
