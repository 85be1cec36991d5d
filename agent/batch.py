"""One report per node and tick (docs/AGENT.md §2b): the node's job output, its job events and its
heartbeat in one ``POST /api/v1/agent/batch/`` instead of one request each.

:class:`BatchSender` fills a report from the node's :class:`~agent.reporter.Reporter` outbox
(oldest events first) and :class:`~agent.joblogs.LogBook` (one chunk per run, as the shipper
sends them) up to :data:`BUDGET_BYTES` of JSON, sends it, and settles each item from the
answer: delivered, or refused for good (a 4xx in its place: logged and dropped, as the single
endpoints' 4xx are). An item that does not fit in a report holding nothing else (more than
:data:`BUDGET_BYTES` of JSON alone) is dropped with an ERROR line: left at the head of the
outbox, it would hold back every report of the node behind it for good. What did not fit goes
in a next report of the same tick, up to :data:`MAX_REPORTS_PER_TICK`. A failure of the whole
request that may pass (connection error, timeout, 5xx, 408, 429) keeps everything for the next
attempt, after the reporter's backoff; the server's items are idempotent, so a repeat is harmless.

Compatibility: a server without the endpoint (404 or 405 for the path) turns the sender off for
good, and the runner goes on with the single endpoints; another 4xx for the whole report (which
a well-formed report never gets) sends that tick's items one by one instead, so each item gets
the single endpoint's own answer.

Units: bytes, seconds (s).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from agent.joblogs import JobLog, LogBook, LogChunk
from agent.messages import BATCH_PATH, Heartbeat, JobEventReport
from agent.reporter import Reporter, StopReporting, TransportError, one_line

log = logging.getLogger(__name__)

#: Most bytes of JSON in one report **(ours)**: under the server's 64 KiB body limit
#: (``DATA_UPLOAD_MAX_MEMORY_SIZE``) with room for the HTTP framing.
BUDGET_BYTES = 48 * 1024
#: Most events and output chunks in one report (the server's bounds: 500 and 50).
MAX_EVENTS = 200
MAX_CHUNKS = 50
#: Most reports one node sends in one tick **(ours)**: a backlog (after an outage) drains over a
#: few ticks rather than holding the node's thread.
MAX_REPORTS_PER_TICK = 4
#: Statuses for the whole report that mean the server has no such endpoint (an older server).
NO_ENDPOINT = frozenset({404, 405})


class AnsweringTransport(Protocol):
    """What a batch report needs of its transport: :meth:`agent.reporter.HttpTransport.post_json`."""

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        """POST ``payload`` as JSON to ``path``; the JSON answer. Raises ``TransportError``."""
        ...


@dataclass(slots=True)
class Report:
    """One report being filled: its body, the events taken (the outbox's oldest) and the chunks
    taken with their logs; ``size``: bytes of JSON so far."""

    body: dict[str, Any]
    events: list[JobEventReport] = field(default_factory=list)
    chunks: list[tuple[JobLog, LogChunk]] = field(default_factory=list)
    size: int = 0
    #: The oldest waiting event or chunk when it does not fit even in a report holding nothing
    #: else, with its size (bytes of JSON): no report can carry it (``BatchSender.send`` drops it).
    oversize_event: tuple[JobEventReport, int] | None = None
    oversize_chunk: tuple[JobLog, LogChunk, int] | None = None

    def fits(self, item: dict[str, Any]) -> bool:
        """Whether ``item`` fits in the budget; counts it when it does."""
        grown = self.size + len(json.dumps(item)) + 2  # its comma and space
        if grown > BUDGET_BYTES:
            return False
        self.size = grown
        return True

    @property
    def empty(self) -> bool:
        """Whether the report carries nothing but the node's name."""
        return not (self.events or self.chunks or "heartbeat" in self.body)


class BatchSender:
    """The batch reports of node ``node`` over ``transport`` (see the module docstring).
    ``every_s``: fewest seconds between two reports of a tick that carries no heartbeat (0: every
    tick), so that a node whose jobs start and end in quick succession gathers them in one
    request; ``enabled`` turns False for good when the server has no batch endpoint. Raises
    ``ValueError`` for a negative ``every_s``."""

    def __init__(self, transport: AnsweringTransport, node: str, every_s: float = 0.0) -> None:
        if every_s < 0:
            raise ValueError(f"every_s must be >= 0, got {every_s}")
        self._transport = transport
        self._node = node
        self._every_s = every_s
        self._last_s = float("-inf")
        self.enabled = True

    def fill(self, reporter: Reporter, book: LogBook | None, heartbeat: Heartbeat | None) -> Report:
        """A report of the node's waiting output (one chunk per run), the oldest waiting events
        and ``heartbeat``, within :data:`BUDGET_BYTES`, :data:`MAX_EVENTS` and
        :data:`MAX_CHUNKS`; the heartbeat carries the reporter's last report latency
        (:meth:`~agent.reporter.Reporter.stamped`)."""
        report = Report({"node": self._node})
        report.size = len(json.dumps(report.body))
        if heartbeat is not None:  # with the previous report's latency (docs/AGENT.md §3)
            beat = {k: v for k, v in reporter.stamped(heartbeat).payload().items() if k != "node"}
            report.fits(beat)  # a heartbeat is bounded (64 GPUs, 128 jobs): always under the budget
            report.body["heartbeat"] = beat
        for job_log in book.pending() if book is not None else []:
            chunk = job_log.next_chunk()
            if chunk is None:
                continue
            item = {"job_id": chunk.job_id, **chunk.payload()}
            if len(report.chunks) >= MAX_CHUNKS:
                break
            if not report.fits(item):
                if report.empty:  # alone it does not fit: it never will
                    report.oversize_chunk = (job_log, chunk, len(json.dumps(item)))
                break
            report.chunks.append((job_log, chunk))
        for event in reporter.head(MAX_EVENTS):
            item = {"job_id": event.job_id, **event.payload()}
            if not report.fits(item):
                if report.empty:  # alone it does not fit: it never will
                    report.oversize_event = (event, len(json.dumps(item)))
                break
            report.events.append(event)
        if report.chunks:
            report.body["logs"] = [{"job_id": c.job_id, **c.payload()} for _, c in report.chunks]
        if report.events:
            report.body["events"] = [{"job_id": e.job_id, **e.payload()} for e in report.events]
        return report

    def send(self, reporter: Reporter, book: LogBook | None, heartbeat: Heartbeat | None, now: float) -> bool:
        """Send the node's reports of this tick at agent time ``now`` (s). Returns whether the
        tick was handled (sent, or kept for a retry); ``False``: the runner sends this tick's
        items by the single endpoints (no batch endpoint, or the report was refused whole).
        Waits out the reporter's backoff unless a heartbeat is due (it probes the server). Each
        report is timed by the reporter (:meth:`~agent.reporter.Reporter.timed`). Raises
        :class:`~agent.reporter.TokenRefused` on a 401."""
        if not self.enabled:
            return False
        if heartbeat is None and (now < reporter.retry_at or now - self._last_s < self._every_s):
            return True
        self._last_s = now
        for _ in range(MAX_REPORTS_PER_TICK):
            report = self.fill(reporter, book, heartbeat)
            if self._drop_oversize(report, reporter, book):
                continue  # it would have held back every item behind it, for good
            if report.empty:
                return True
            try:
                answer = reporter.timed(partial(self._transport.post_json, BATCH_PATH, report.body))
            except StopReporting:
                raise  # the node token is wrong or revoked: the single endpoints would say the same
            except TransportError as exc:
                if exc.retryable:
                    reporter.failed(now, exc)
                    return True
                if exc.status in NO_ENDPOINT:
                    self.enabled = False
                    log.warning(
                        "%s: the server has no batch endpoint (%s); one request per item",
                        self._node,
                        one_line(exc),
                    )
                else:
                    log.error(
                        "%s: batch report refused (%s); this tick's items go one by one",
                        self._node,
                        one_line(exc),
                    )
                return False
            self._settle(report, answer, reporter, book, now)
            heartbeat = None
        return True

    def _drop_oversize(self, report: Report, reporter: Reporter, book: LogBook | None) -> bool:
        """Drop (one ERROR line each) the item of ``report`` no report can carry; whether there was one."""
        if report.oversize_event is not None:
            event, size = report.oversize_event
            log.error(
                "%s: %s of job %d is %d bytes of JSON, more than a report's %d; dropped",
                self._node,
                event.event,
                event.job_id,
                size,
                BUDGET_BYTES,
            )
            reporter.settle(1, {})
            return True
        if report.oversize_chunk is not None and book is not None:
            job_log, chunk, size = report.oversize_chunk
            log.error(
                "%s: output of job %d (%s) at offset %d is %d bytes of JSON, more than a report's %d; "
                "the rest of that run's output is dropped",
                self._node,
                chunk.job_id,
                chunk.run,
                chunk.offset,
                size,
                BUDGET_BYTES,
            )
            book.drop(job_log)
            return True
        return False

    def _settle(
        self, report: Report, answer: Any, reporter: Reporter, book: LogBook | None, now: float
    ) -> None:
        reporter.landed(now)
        try:
            events = [(int(a["code"]), str(a.get("error", ""))) for a in answer["events"]]
            logs = [(int(a["code"]), str(a.get("error", ""))) for a in answer["logs"]]
        except (KeyError, TypeError, ValueError):
            events, logs = [], []
        if len(events) != len(report.events) or len(logs) != len(report.chunks):
            # not the answer of this report (a proxy's page?): every item is idempotent, send again
            log.error("%s: malformed batch answer %r; the items will be sent again", self._node, answer)
            return
        reporter.settle(len(events), {i: m for i, (code, m) in enumerate(events) if code >= 300})
        for (job_log, chunk), (code, message) in zip(report.chunks, logs, strict=True):
            if code < 300:
                job_log.delivered(chunk)
            elif book is not None:
                log.warning(
                    "server refused the output of job %d (%s): %s", chunk.job_id, chunk.run, one_line(message)
                )
                book.drop(job_log)
