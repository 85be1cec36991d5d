"""What travels between the server and the agent (docs/AGENT.md is the prose version).

Server → agent: :class:`PlacementMessage`, the keyword arguments of the Celery task
``sharewise.apply_placement`` on queue ``node.<NAME>``; the server builds them with
:func:`stop_kwargs` and :func:`placement_kwargs`, the agent parses them with
:meth:`PlacementMessage.from_kwargs`.
The same messages also travel by pull (docs/AGENT.md §1a): the agent long-polls
:data:`ORDERS_PATH` and each order carries one of them.
Agent → server: :class:`JobEventReport` and :class:`Heartbeat`, JSON bodies POSTed to the REST API.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

TASK_NAME = "sharewise.apply_placement"
#: The agent's long poll of its orders (the pull transport), and the longest wait it may ask (s).
ORDERS_PATH = "/api/v1/agent/orders/"
ORDERS_MAX_WAIT_S = 30.0
#: One report per node and tick: its output, events and heartbeat together (docs/AGENT.md §2b).
BATCH_PATH = "/api/v1/agent/batch/"
#: Largest ``report_latency_s`` a heartbeat may carry (s, an hour) **(ours)**: the server refuses
#: more (a 400 naming it), the agent sends at most this (docs/AGENT.md §3).
MAX_REPORT_LATENCY_S = 3600.0
#: The ``code`` of the server's 403 to a token of another node than the one reported or polled
#: for (heartbeat, batch, orders; docs/AGENT.md §4): the agent stops on it as on a 401. A 403 for
#: one job (never placed on this node) carries no code: only that report is dropped.
TOKEN_NODE_MISMATCH = "token_node_mismatch"
#: The ``code`` of the server's 403 to an agent endpoint called with other credentials than a
#: node token (``Authorization: Token ...``, a tenant's API token; docs/AGENT.md §1): the agent
#: always sends ``Node <token>``, so it gets this only when something on the way (a proxy)
#: replaced its header, and it stops as on a 401 (nothing it sends would land).
NODE_TOKEN_REQUIRED = "node_token_required"
ACTIONS = ("start", "stop", "update")
EVENTS = ("started", "progress", "finished", "failed", "stopped")
#: Longest ``reason`` of a job event (characters, as Python and the server's serializer count
#: them, not bytes) **(ours)**: the server refuses a longer one (a 400), so the agent cuts every
#: reason it sends to this (:func:`short_reason`) and the server's serializer takes it from here.
MAX_REASON_CHARS = 2000
#: What a ``failed`` event says of its cause: ``"oom"`` (the job ran out of GPU memory, from its
#: output), ``""`` (anything else).
FAILURE_KINDS = ("", "oom")

Action = Literal["start", "stop", "update"]
EventKind = Literal["started", "progress", "finished", "failed", "stopped"]


def queue_name(node: str) -> str:
    """The Celery queue of ``node``: ``node.<NAME>``."""
    return f"node.{node}"


def stop_kwargs(node: str, job_id: int, generation: int) -> dict[str, Any]:
    """The task's keyword arguments telling ``node`` to stop ``job_id`` (a preemption, a cancel, or
    a job the node should not run); what :meth:`PlacementMessage.from_kwargs` reads back."""
    return {"node": node, "job_id": job_id, "generation": generation, "action": "stop"}


def placement_kwargs(
    node: str,
    job_id: int,
    gpu_indices: Sequence[int],
    *,
    generation: int,
    action: Literal["start", "update"],
    sub_batch: int,
    accum_steps: int,
    batch_size: int,
    iterations: int,
    iterations_done: float,
    iter_time_s: float,
    slowdown: float,
    command: str,
    model: str,
    partners: Sequence[tuple[str, int]] = (),
) -> dict[str, Any]:
    """The task's keyword arguments of a ``start`` or ``update`` of ``job_id`` on ``gpu_indices``
    of ``node`` (fields as documented on :class:`PlacementMessage`; ``command`` as the server stores
    it, one string, split by the agent; ``partners``: ``(model, sub-batch)`` of each job sharing a
    GPU of the job); what :meth:`PlacementMessage.from_kwargs` reads back."""
    return {
        "node": node,
        "job_id": job_id,
        "gpu_indices": list(gpu_indices),
        "generation": generation,
        "action": action,
        "sub_batch": sub_batch,
        "accum_steps": accum_steps,
        "batch_size": batch_size,
        "iterations": iterations,
        "iterations_done": iterations_done,
        "iter_time_s": iter_time_s,
        "slowdown": slowdown,
        "command": command,
        "model": model,
        "partners": [{"model": m, "sub_batch": b} for m, b in partners],
    }


class MessageError(ValueError):
    """A placement message that cannot be applied; ``str()`` says which field and why."""


def _int(kwargs: dict[str, Any], name: str, low: int, default: int | None = None) -> int:
    value = kwargs.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MessageError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise MessageError(f"{name} must be >= {low}, got {value}")
    return value


def _float(kwargs: dict[str, Any], name: str, low: float, default: float | None = None) -> float:
    value = kwargs.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MessageError(f"{name} must be a finite number, got {value!r}")
    if value < low:
        raise MessageError(f"{name} must be >= {low}, got {value}")
    return float(value)


def split_command(text: str) -> list[str]:
    """A job's ``command`` string → its arguments, split as a POSIX shell would (``shlex``), the
    way an agent runs it (no shell). Raises :class:`MessageError` for a string that cannot be split
    (an unclosed quote, a trailing escape) or that holds no argument; the API refuses such a
    command at submission with this message, so a job never fails on its node for it."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise MessageError(f"command cannot be split into arguments: {exc}") from None
    if not words:
        raise MessageError(f"command holds no argument, got {text!r}")
    return words


def _command(value: Any) -> tuple[str, ...] | None:
    if value is None or (isinstance(value, str | list | tuple) and not value):
        return None  # no command (the server stores an empty string): fine for emulated jobs
    if isinstance(value, str):
        value = split_command(value)
    if not isinstance(value, list | tuple) or not value or not all(isinstance(a, str) for a in value):
        raise MessageError(f"command must be a non-empty list of strings or a string, got {value!r}")
    return tuple(value)


def _partners(value: Any) -> tuple[tuple[str, int], ...]:
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise MessageError(f"partners must be a list, got {value!r}")
    partners = []
    for item in value:
        model = item.get("model") if isinstance(item, dict) else None
        sub = item.get("sub_batch") if isinstance(item, dict) else None
        if not isinstance(model, str) or isinstance(sub, bool) or not isinstance(sub, int) or sub < 1:
            raise MessageError(f"partners must be objects with a model and a sub_batch >= 1, got {item!r}")
        partners.append((model, sub))
    return tuple(partners)


@dataclass(frozen=True, slots=True)
class PlacementMessage:
    """One change of a job's placement on one node (ARCHITECTURE.md, data flow step 6).

    - ``generation``: increases with every message the server sends for ``job_id``; the agent
      applies a message only if its generation is higher than any it has seen for the job.
    - ``action``: ``start`` (run the job), ``stop`` (cancel or preempt it), ``update`` (new
      ``slowdown`` because a co-located partner started or ended).
    - ``gpu_indices``: distinct GPU indices on this node; ``sub_batch`` × ``accum_steps`` =
      ``batch_size`` (gradient accumulation keeps the global batch, MODEL.md §1).
    - ``iterations``: the job's total; ``iterations_done``: progress the server knows (the start
      point of a (re)start); ``iter_time_s``: exclusive time of one iteration at ``sub_batch``
      (s, ``t_j(b)``); ``slowdown``: ξ ≥ 1 for the current co-location (1 alone, MODEL.md §2).
    - ``command``: argv of the job (subprocess executor); ``model``: the model's name;
      ``partners``: ``(model, sub-batch)`` of each job sharing one of the job's GPUs (on any node
      of its gang; informative: an emulated executor may derive its true speed from them).
    """

    node: str
    job_id: int
    generation: int
    action: Action
    gpu_indices: tuple[int, ...] = ()
    sub_batch: int = 1
    accum_steps: int = 1
    batch_size: int = 1
    iterations: int = 1
    iterations_done: float = 0.0
    iter_time_s: float = 1.0
    slowdown: float = 1.0
    command: tuple[str, ...] | None = None
    model: str = ""
    partners: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> PlacementMessage:
        """Validate the task's keyword arguments.

        ``node``, ``job_id``, ``generation`` and ``action`` are always required; ``start`` and
        ``update`` also need ``gpu_indices``, ``sub_batch``, ``accum_steps``, ``batch_size``,
        ``iterations`` and ``iter_time_s``. Unknown keys are ignored (newer servers may add
        fields). Raises :class:`MessageError` naming the first bad field.
        """
        if not isinstance(kwargs, dict):
            raise MessageError(f"a placement must be a JSON object, got {type(kwargs).__name__}")
        node = kwargs.get("node")
        if not isinstance(node, str) or not node:
            raise MessageError(f"node must be a non-empty string, got {node!r}")
        job_id = _int(kwargs, "job_id", 0)
        generation = _int(kwargs, "generation", 0)
        action = kwargs.get("action")
        if action not in ACTIONS:
            raise MessageError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
        if action == "stop":
            return cls(node, job_id, generation, action)
        indices = kwargs.get("gpu_indices")
        if (
            not isinstance(indices, list | tuple)
            or not indices
            or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices)
            or len(set(indices)) != len(indices)
        ):
            raise MessageError(
                f"gpu_indices must be a non-empty list of distinct indices >= 0, got {indices!r}"
            )
        sub_batch = _int(kwargs, "sub_batch", 1)
        accum_steps = _int(kwargs, "accum_steps", 1)
        batch_size = _int(kwargs, "batch_size", 1)
        if sub_batch * accum_steps != batch_size:
            raise MessageError(
                "sub_batch × accum_steps must equal batch_size, "
                f"got {sub_batch} × {accum_steps} != {batch_size}"
            )
        iterations = _int(kwargs, "iterations", 1)
        iterations_done = _float(kwargs, "iterations_done", 0.0, default=0.0)
        if iterations_done > iterations:
            raise MessageError(f"iterations_done ({iterations_done}) exceeds iterations ({iterations})")
        iter_time_s = _float(kwargs, "iter_time_s", 0.0)
        if iter_time_s <= 0:
            raise MessageError(f"iter_time_s must be > 0 s, got {iter_time_s}")
        slowdown = _float(kwargs, "slowdown", 1.0, default=1.0)
        model = kwargs.get("model") or ""
        if not isinstance(model, str):
            raise MessageError(f"model must be a string, got {model!r}")
        return cls(
            node,
            job_id,
            generation,
            action,
            tuple(indices),
            sub_batch,
            accum_steps,
            batch_size,
            iterations,
            iterations_done,
            iter_time_s,
            slowdown,
            _command(kwargs.get("command")),
            model,
            _partners(kwargs.get("partners")),
        )

    def same_run(self, other: PlacementMessage) -> bool:
        """Whether ``other`` can be applied to a running job without restarting it.

        Only the slowdown may change in place; other GPUs, another sub-batch or command need a
        restart of the job's process.
        """
        return (self.gpu_indices, self.sub_batch, self.accum_steps, self.command) == (
            other.gpu_indices,
            other.sub_batch,
            other.accum_steps,
            other.command,
        )


#: What ends a reason :func:`short_reason` cut (counted in :data:`MAX_REASON_CHARS`).
REASON_CUT = " [cut]"


def short_reason(text: str) -> str:
    """``text`` as a job event's ``reason`` the server takes: at most :data:`MAX_REASON_CHARS`
    characters (a longer one keeps its beginning and ends with :data:`REASON_CUT`), NUL characters
    (which the server refuses) and lone surrogates (which no UTF-8 database can store; an
    undecodable file name can bring them) each replaced by U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - len(REASON_CUT)] + REASON_CUT
    return text


@dataclass(frozen=True, slots=True)
class JobEventReport:
    """A job's event as a node agent reports it, POSTed to ``/api/v1/agent/jobs/{job_id}/events/``.

    ``generation``: the highest generation the agent has applied for the job;
    ``iterations_done``: completed iterations; ``iter_time_s``: measured time of one iteration
    (s, uncompressed by ``--speedup``; ``None`` before the first measurement); ``reason``: why
    a job failed or stopped, cut to what the server takes (:func:`short_reason`: every reason
    the agent sends goes through here); ``memory_mb``: the job's peak GPU memory per GPU at its sub-batch
    (MB, ``None``: not reported); ``failure_kind``: ``"oom"`` for a job that ran out of GPU memory
    (:data:`FAILURE_KINDS`).
    """

    node: str
    job_id: int
    generation: int
    event: EventKind
    iterations_done: int
    iter_time_s: float | None = None
    reason: str = ""
    memory_mb: float | None = None
    failure_kind: str = ""

    def __post_init__(self) -> None:
        # a reason the server refuses (too long: an unstartable 1,200-character command's error)
        # would leave the job running there for ever, placed again and again
        object.__setattr__(self, "reason", short_reason(self.reason))

    @property
    def path(self) -> str:
        """The API path (below ``--api``) this event goes to."""
        return f"/api/v1/agent/jobs/{self.job_id}/events/"

    def payload(self) -> dict[str, Any]:
        """The JSON body."""
        return {
            "generation": self.generation,
            "event": self.event,
            "iterations_done": self.iterations_done,
            "iter_time_s": self.iter_time_s,
            "reason": self.reason,
            "memory_mb": self.memory_mb,
            "failure_kind": self.failure_kind,
        }


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """The node's heartbeat, POSTed to ``/api/v1/agent/heartbeat/``.

    ``gpus``: ``[{index, uuid, memory_mb, healthy}]``; ``running``: the jobs the node runs now,
    ``[{job_id, generation, iterations_done}]`` — the server reconciles its ledger from it;
    ``executor``: ``emulated`` or ``subprocess`` (sent when known), so the server knows whether a
    job needs a command (docs/AGENT.md §3); ``report_latency_s``: how long the node's previous
    report took from send to answer (s, the agent's monotonic clock; ``None``: not sent), which
    the server's silence rule counts on top of the timeout (set by the
    :class:`~agent.reporter.Reporter` when it sends the heartbeat).
    """

    node: str
    gpus: tuple[dict[str, Any], ...]
    running: tuple[dict[str, Any], ...]
    executor: str = ""
    report_latency_s: float | None = None

    path = "/api/v1/agent/heartbeat/"

    def payload(self) -> dict[str, Any]:
        """The JSON body."""
        body: dict[str, Any] = {"node": self.node, "gpus": list(self.gpus), "running": list(self.running)}
        if self.executor:
            body["executor"] = self.executor
        if self.report_latency_s is not None:
            body["report_latency_s"] = self.report_latency_s
        return body
