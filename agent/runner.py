"""The agent's loop: step the agents, deliver their events and their jobs' output, send heartbeats.

One :class:`Runner` serves one node or a whole emulated fleet (``--fleet``). :meth:`Runner.tick`
is one pass, so tests call it with a fake time; :meth:`Runner.run` repeats it every ``tick_s``
seconds until its stop event is set.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import cast

from agent.batch import AnsweringTransport, BatchSender
from agent.core import Agent, Clock
from agent.gpus import GpuInfo
from agent.joblogs import LogShipper
from agent.reporter import Reporter, StopReporting

log = logging.getLogger(__name__)


class Runner:
    """Drives ``agents`` (each with its reporter, same order).

    ``heartbeat_every_s``: wall seconds between heartbeats of a node; ``gpu_probe``: called
    before each heartbeat to refresh the GPUs' health (NVML nodes; when it returns ``None`` the
    node's known GPUs are reported unhealthy), ``None`` for declared GPUs. ``ship_logs``: send
    each agent's job output (:class:`~agent.joblogs.LogShipper`, over its reporter's transport)
    before its events, so a job's last lines reach the server before its ``finished``.
    ``batch``: send each node's output, events and heartbeat of a tick in one request
    (:class:`~agent.batch.BatchSender`, docs/AGENT.md §2b) when its reporter's transport can
    (``post_json``); the single endpoints otherwise, and after a server said it has no batch
    endpoint; ``report_every_s``: fewest seconds between two such reports without a heartbeat
    (:class:`~agent.batch.BatchSender`'s ``every_s``). Raises ``ValueError`` when the two
    sequences differ in length.

    With several nodes (``--fleet``) one pass sends their reports one after another, so each
    node's report also waits for the others': a node that reported in a pass tells the whole
    pass's time (``clock``) as its report latency (:meth:`~agent.reporter.Reporter.waited`,
    docs/AGENT.md §3), how far apart the server reads its reports.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        reporters: Sequence[Reporter],
        clock: Clock = time.monotonic,
        heartbeat_every_s: float = 5.0,
        tick_s: float = 0.5,
        gpu_probe: Callable[[], tuple[GpuInfo, ...] | None] | None = None,
        ship_logs: bool = True,
        batch: bool = True,
        report_every_s: float = 0.0,
    ) -> None:
        if len(agents) != len(reporters):
            raise ValueError(f"{len(agents)} agents but {len(reporters)} reporters")
        self._pairs = list(zip(agents, reporters, strict=True))
        self._shippers = [LogShipper(r.transport) if ship_logs else None for r in reporters]
        self._ship_logs = ship_logs
        self._senders = [
            BatchSender(cast(AnsweringTransport, r.transport), a.node, report_every_s)
            if batch and hasattr(r.transport, "post_json")
            else None
            for a, r in self._pairs
        ]
        self._clock = clock
        self._heartbeat_every_s = heartbeat_every_s
        self._tick_s = tick_s
        self._gpu_probe = gpu_probe
        self._next_heartbeat = float("-inf")
        #: The 401 (or the heartbeat's 404) that ended :meth:`run` (``None`` otherwise).
        self.refused: StopReporting | None = None
        #: Called with that 401 from :meth:`run`'s thread (``agent.cli`` stops the agent).
        self.on_refused: Callable[[StopReporting], None] | None = None

    def tick(self, now: float | None = None) -> None:
        """One pass at wall time ``now`` (s): step, heartbeat when due, flush the outboxes (after
        a 401, :attr:`refused`, only step: the server takes nothing from this token). Raises
        :class:`~agent.reporter.TokenRefused` on a 401, :class:`~agent.reporter.WrongApi` on a 404
        to the heartbeat."""
        now = self._clock() if now is None else now
        if self.refused is not None:
            for agent, _ in self._pairs:
                agent.step(now)
            return
        heartbeat_due = now >= self._next_heartbeat
        probe = heartbeat_due and self._gpu_probe is not None
        if heartbeat_due:
            self._next_heartbeat = now + self._heartbeat_every_s
        probed = self._gpu_probe() if probe and self._gpu_probe is not None else None
        started, reports = self._clock(), [r.reports for _, r in self._pairs]
        for (agent, reporter), shipper, sender in zip(
            self._pairs, self._shippers, self._senders, strict=True
        ):
            reporter.submit(agent.step(now))
            try:
                if heartbeat_due and probe:
                    # NVML stopped answering altogether: every GPU is suspect, none is hidden.
                    agent.set_gpus(probed or tuple(replace(g, healthy=False) for g in agent.gpus))
                book = agent.logs if self._ship_logs else None
                if sender is not None and sender.send(
                    reporter, book, agent.heartbeat() if heartbeat_due else None, now
                ):
                    continue
                if shipper is not None:
                    shipper.ship([agent.logs], now)
                if heartbeat_due:
                    reporter.heartbeat(agent.heartbeat(), now)
                reporter.flush(now)
            except StopReporting as exc:
                exc.node = agent.node
                raise
        if len(self._pairs) > 1:
            took = self._clock() - started
            for (_, reporter), before in zip(self._pairs, reports, strict=True):
                if reporter.reports > before:
                    reporter.waited(took)

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` is set; then stop every job and deliver what can be delivered.

        A 401 (:class:`~agent.reporter.TokenRefused`: the node token wrong or revoked) or a 404 to
        the heartbeat (:class:`~agent.reporter.WrongApi`: ``--api`` is not the server's URL) ends
        the loop as well: it is kept in :attr:`refused` and given to ``on_refused``; the jobs are
        then stopped without reporting (nothing would land)."""
        while not stop.is_set():
            try:
                self.tick()
            except StopReporting as exc:  # nothing will ever land: stop (agent.cli exits non-zero)
                self.refused = exc
                if self.on_refused is not None:
                    self.on_refused(exc)
                break
            except Exception:  # a bug in one tick must not silence the node for good
                log.exception("agent tick failed")
            stop.wait(self._tick_s)
        self.drain()

    def drain(self, timeout_s: float = 15.0) -> None:
        """Stop every job, wait (at most ``timeout_s`` wall seconds) for them to exit, flush."""
        for agent, _ in self._pairs:
            agent.shutdown()
        deadline = time.monotonic() + timeout_s
        while any(agent.busy for agent, _ in self._pairs) and time.monotonic() < deadline:
            self.tick()
            time.sleep(0.05)
        self.tick()
