"""The pull transport, the agent's side (docs/AGENT.md §1a): long-poll ``GET
/api/v1/agent/orders/`` for the node's placements and hand each to the same handler the Celery
task uses (:func:`agent.core.route`) — no broker needed, like the kubelet watching the API server.

Per node the :class:`Puller` keeps the cursor the server answered (the number of the last order
applied) and sends it with the next poll, which acknowledges the orders up to it. A poll whose
answer is lost is repeated with the same cursor and gets the same orders again; the agent's
generation rule ignores what it already applied. Errors (the server down, a 5xx) are logged and
retried after 1 s, 2 s, 4 s … capped at ``backoff_max_s``; a 401 (the node token wrong or
revoked, :class:`~agent.reporter.TokenRefused`) ends :meth:`Puller.run`, which keeps it in
:attr:`Puller.refused` and calls ``on_refused``.

Units: seconds (s).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agent.messages import ORDERS_MAX_WAIT_S, ORDERS_PATH
from agent.reporter import StopReporting, TransportError, one_line

log = logging.getLogger(__name__)

#: Seconds a request may take beyond the poll's wait before it counts as lost **(ours)**.
REQUEST_SLACK_S = 10.0
#: Seconds between two passes over the nodes of a fleet, which polls without waiting **(ours)**.
FLEET_PASS_S = 1.0


class OrderSource(Protocol):
    """What the puller polls: :class:`agent.reporter.HttpTransport`'s ``get``."""

    def get(self, path: str, query: dict[str, Any], timeout_s: float | None = None) -> Any:
        """GET ``path?query``; the JSON body. Raises :class:`TransportError`."""
        ...


class Puller:
    """Polls the orders of each node of ``sources`` (node name → its authenticated source) and
    hands every message to ``deliver`` (e.g. ``partial(route, agents)``), in the order numbered.

    ``wait_s``: how long one poll may wait on the server (0 … 30 s; a fleet of several nodes polls
    each without waiting, every :data:`FLEET_PASS_S`); ``backoff_s``/``backoff_max_s``: the first
    and largest pause after a failed poll (s). Raises ``ValueError`` for a ``wait_s`` out of range
    or no node.
    """

    def __init__(
        self,
        sources: Mapping[str, OrderSource],
        deliver: Callable[[dict[str, Any]], bool],
        wait_s: float = 25.0,
        backoff_s: float = 1.0,
        backoff_max_s: float = 30.0,
    ) -> None:
        if not sources:
            raise ValueError("no node to poll")
        if not 0 <= wait_s <= ORDERS_MAX_WAIT_S:
            raise ValueError(f"wait_s must be 0 … {ORDERS_MAX_WAIT_S:g}, got {wait_s}")
        self._sources = dict(sources)
        self._deliver = deliver
        self._wait_s = wait_s if len(sources) == 1 else 0.0
        self._backoff_first_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self.backoff_s = backoff_s
        self.cursors = dict.fromkeys(sources, 0)
        #: Whether the polls name their node (``?node=``): a server older than that parameter
        #: answers it 400 ``unknown parameter``, and then the puller polls without it.
        self.names_node = True
        self._stop: threading.Event | None = None
        #: The 401 that ended :meth:`run` (``None`` while it runs or after a plain stop).
        self.refused: StopReporting | None = None
        #: Called with that 401 from :meth:`run`'s thread (``agent.cli`` stops the agent).
        self.on_refused: Callable[[StopReporting], None] | None = None

    def poll(self, node: str) -> int:
        """One poll of ``node``'s orders: deliver each, then keep the server's cursor. Returns the
        number delivered. Raises :class:`TransportError` when the poll failed (nothing delivered,
        cursor unchanged) or the answer is malformed."""
        query: dict[str, Any] = {"after": self.cursors[node], "wait": self._wait_s}
        if self.names_node:  # so that another node's token is refused, not its orders run
            query["node"] = node
        try:
            answer = self._sources[node].get(ORDERS_PATH, query, timeout_s=self._wait_s + REQUEST_SLACK_S)
        except TransportError as exc:
            if not (self.names_node and exc.status == 400 and "node: unknown parameter" in str(exc)):
                raise
            log.warning("the server does not know ?node= (older than this agent): polling without it")
            self.names_node = False
            return self.poll(node)
        try:
            orders = [(int(o["seq"]), o["message"]) for o in answer["orders"]]
            cursor = int(answer["cursor"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TransportError(
                f"malformed orders answer ({exc!r}): {answer!r:.200}", retryable=True
            ) from None
        if self._stop is not None and self._stop.is_set():
            return 0  # shutting down: start nothing now; the orders stay for the next life
        for seq, message in orders:
            try:
                self._deliver(message)
            except Exception:  # one bad order must not block the node's later ones
                log.exception("order %d of node %s failed: %r", seq, node, message)
        self.cursors[node] = cursor
        return len(orders)

    def poll_all(self) -> bool:
        """One poll of every node; returns whether all succeeded (a failure is logged and
        doubles :attr:`backoff_s`, a full success resets it). Raises :class:`TokenRefused` on a
        401."""
        ok = True
        for node in self._sources:
            try:
                self.poll(node)
            except StopReporting as exc:
                exc.node = node
                raise
            except TransportError as exc:
                ok = False
                log.warning(
                    "orders of %s not polled (%s); retry in %.0f s", node, one_line(exc), self.backoff_s
                )
        if ok:
            self.backoff_s = self._backoff_first_s
        return ok

    def run(self, stop: threading.Event) -> None:
        """Poll until ``stop`` is set: at once again after a long poll, every
        :data:`FLEET_PASS_S` for a fleet, after the backoff when a poll failed. Once ``stop`` is
        set, an answer still on its way is not delivered. A 401 ends it (:attr:`refused`)."""
        self._stop = stop
        while not stop.is_set():
            try:
                ok = self.poll_all()
            except StopReporting as exc:
                self.refused = exc
                if self.on_refused is not None:
                    self.on_refused(exc)
                return
            if not ok:
                stop.wait(self.backoff_s)
                self.backoff_s = min(self.backoff_s * 2, self._backoff_max_s)
            elif self._wait_s == 0:
                stop.wait(FLEET_PASS_S)
