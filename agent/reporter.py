"""Reporting to the REST API: an HTTP transport and an ordered, bounded outbox with backoff.

Events must reach the server in the order they happened and must not be lost while it is down
(TESTING.md invariant 9). The :class:`Reporter` keeps them in an in-memory outbox and sends them
oldest first; a connection error, a timeout, a 5xx, 408 or 429 keeps the event at the head and
retries after an exponential backoff (1 s, 2 s, 4 s … capped at 60 s by default); another 4xx (e.g.
409 for a stale generation) means the server will never take it: it is logged and dropped. A 401 is
none of these: the node token is wrong or was revoked, so nothing this agent sends will ever land;
nor is a 403 coded ``token_node_mismatch`` (the token is another node's, :class:`TokenMismatch`),
nor one coded ``node_token_required`` (the server did not receive the node token,
:class:`NodeTokenNotSeen`), nor a 404 to the heartbeat (``--api`` is not the server's URL,
:class:`WrongApi`); these :class:`StopReporting` propagate (the event stays in the outbox) and the
agent stops (``agent.cli``). While the server is down, a newer ``progress`` event of a job replaces
its older unsent one, which bounds the outbox by about three events per job run; past ``max_events``
the oldest ``progress`` (else the oldest event) is dropped with an ERROR in the log — never
silently.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from agent import __version__
from agent.messages import (
    MAX_REPORT_LATENCY_S,
    NODE_TOKEN_REQUIRED,
    TOKEN_NODE_MISMATCH,
    Heartbeat,
    JobEventReport,
)

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 429})
#: Decimals of the ``report_latency_s`` a heartbeat carries (0.1 s) **(ours)**: the server compares
#: it with a timeout of seconds; a coarse value keeps a fast server's answer at exactly 0.
LATENCY_DECIMALS = 1

T = TypeVar("T")


def one_line(text: object, limit: int = 500) -> str:
    """``str(text)`` on one line (its whitespace runs, newlines included, made one space), at most
    ``limit`` characters: how the agent logs a server's answer (a proxy's page spans lines)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def bounded_latency(took_s: float) -> float:
    """A report's time (s) as a heartbeat tells it: 0 … ``MAX_REPORT_LATENCY_S``, to 0.1 s."""
    return round(min(max(0.0, took_s), MAX_REPORT_LATENCY_S), LATENCY_DECIMALS)


class TransportError(Exception):
    """A report did not reach the server. ``retryable``: try again later; ``status``: HTTP status."""

    def __init__(self, message: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class StopReporting(TransportError):
    """An answer after which nothing this agent sends will land: it stops (``agent.cli``) with
    this message rather than retry or drop reports for ever. :class:`TokenRefused` (exit status
    3) and :class:`WrongApi` (exit status 2). ``status``: the HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message, retryable=False, status=status)
        #: The node whose report it was, once known (the runner and the puller name it).
        self.node: str | None = None


class TokenRefused(StopReporting):
    """The server answered 401 to the node token: wrong, or revoked (or, :class:`TokenMismatch`,
    a 403: another node's). Retrying cannot help, and dropping the report would hide it: the
    agent stops with this message (``agent.cli``). ``status``: the HTTP status (401, 403)."""

    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message, status=status)


class WrongApi(StopReporting):
    """The server answered 404 to the heartbeat, a path every Sharewise server has: ``--api`` is
    not the server's base URL (a page of it, another service). Every report would be a 404 too:
    the agent stops with exit status 2, as for a bad argument."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=404)


class TokenMismatch(TokenRefused):
    """The server answered 403 with ``code`` :data:`TOKEN_NODE_MISMATCH`: the token is valid but
    belongs to node ``token_node``, not to ``node``, the one this agent reports for. Nothing it
    sends would land either, so it stops as on a 401. A 403 without that code (a job never
    placed on this node) is a plain :class:`TransportError`: only that report is dropped."""

    def __init__(self, message: str, token_node: str, node: str) -> None:
        super().__init__(message, status=403)
        self.token_node = token_node
        self.node = node


class NodeTokenNotSeen(TokenRefused):
    """The server answered 403 with ``code`` :data:`NODE_TOKEN_REQUIRED`: it received other
    credentials than the ``Authorization: Node <token>`` this agent sends, so something on the
    way (a proxy) replaced the header. Nothing it sends would land: it stops as on a 401."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=403)


def refusal_of_token(status: int, path: str, body: str) -> TokenRefused | None:
    """The :class:`TokenRefused` an HTTP error answer means, or ``None`` when it concerns only
    that report: a 401, or a 403 whose JSON body is ``{"code": "token_node_mismatch",
    "token_node", "node", "error"}`` (:class:`TokenMismatch`) or ``{"code":
    "node_token_required", "error"}`` (:class:`NodeTokenNotSeen`; docs/AGENT.md §1)."""
    if status == 401:
        return TokenRefused(f"HTTP 401 from {path}: {body}")
    if status != 403:
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    if answer.get("code") == NODE_TOKEN_REQUIRED:
        return NodeTokenNotSeen(f"HTTP 403 from {path}: {answer.get('error', body)}")
    if answer.get("code") != TOKEN_NODE_MISMATCH:
        return None
    return TokenMismatch(
        f"HTTP 403 from {path}: {answer.get('error', body)}",
        token_node=str(answer.get("token_node", "?")),
        node=str(answer.get("node", "?")),
    )


class Transport(Protocol):
    """Sends one JSON body to one API path; raises :class:`TransportError` when it did not land."""

    def post(self, path: str, payload: dict[str, Any]) -> None:
        """POST ``payload`` as JSON to ``path`` (below the API's base URL)."""
        ...


class HttpTransport:
    """POSTs JSON with the standard library, authenticated by ``Authorization: Node <token>``.

    ``api``: the server's base URL (``http://host:8000``); ``timeout_s``: per request (s).
    Raises ``ValueError`` for a URL that is not http(s) or an empty token.
    """

    def __init__(self, api: str, token: str, timeout_s: float = 5.0) -> None:
        if not api.startswith(("http://", "https://")):
            raise ValueError(f"the API URL must start with http:// or https://, got {api!r}")
        if not token:
            raise ValueError("the node token is empty")
        self._api = api.rstrip("/")
        self._token = token
        self._timeout_s = timeout_s

    def post(self, path: str, payload: dict[str, Any]) -> None:
        """One POST; 2xx is success, see the module docstring for the rest."""
        self._send(path, data=json.dumps(payload).encode(), method="POST", timeout_s=self._timeout_s)

    def post_json(self, path: str, payload: dict[str, Any]) -> Any:
        """One POST whose JSON answer is wanted (the batch report, ``agent.batch``); returns the
        parsed body. Raises :class:`TransportError` as :meth:`post` does, also (not retryable) for
        a body that is not JSON."""
        body = self._send(path, data=json.dumps(payload).encode(), method="POST", timeout_s=self._timeout_s)
        try:
            return json.loads(body)
        except ValueError:
            raise TransportError(f"{path}: the answer is not JSON: {body[:200]!r}", retryable=False) from None

    def get(self, path: str, query: dict[str, Any], timeout_s: float | None = None) -> Any:
        """One GET of ``path?query`` (the orders' long poll: give a ``timeout_s`` longer than its
        wait); returns the JSON body. Raises :class:`TransportError` as :meth:`post` does, also
        (not retryable) for a body that is not JSON."""
        body = self._send(
            f"{path}?{urllib.parse.urlencode(query)}",
            data=None,
            method="GET",
            timeout_s=timeout_s or self._timeout_s,
        )
        try:
            return json.loads(body)
        except ValueError:
            raise TransportError(f"{path}: the answer is not JSON: {body[:200]!r}", retryable=False) from None

    def _send(self, path: str, data: bytes | None, method: str, timeout_s: float) -> bytes:
        headers = {
            "Authorization": f"Node {self._token}",
            "Accept": "application/json",
            "User-Agent": f"sharewise-agent/{__version__}",
        }
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self._api + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as exc:
            body = exc.read(500).decode(errors="replace")
            refusal = refusal_of_token(exc.code, path, body)
            if refusal is not None:
                raise refusal from None
            retryable = exc.code >= 500 or exc.code in RETRYABLE_STATUSES
            raise TransportError(
                f"HTTP {exc.code} from {path}: {body}", retryable=retryable, status=exc.code
            ) from None
        except (urllib.error.URLError, OSError) as exc:  # refused, reset, DNS, timeout
            raise TransportError(f"{path}: {exc}", retryable=True) from None


class Reporter:
    """The outbox of one node: ordered delivery of job events, best-effort heartbeats.

    ``max_events``: outbox bound; ``backoff_s``/``backoff_max_s``: first and largest wait
    between retries (s). Times are the agent's clock (s); the reporter never sleeps. ``clock``:
    the monotonic clock (s) that times each report from send to answer
    (:attr:`report_latency_s`, :meth:`timed`).
    """

    def __init__(
        self,
        transport: Transport,
        max_events: int = 10_000,
        backoff_s: float = 1.0,
        backoff_max_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be >= 1, got {max_events}")
        self._transport = transport
        self._max_events = max_events
        self._backoff_first_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._backoff_s = backoff_s
        self._retry_at = float("-inf")
        self._outbox: deque[JobEventReport] = deque()
        self._clock = clock
        #: How long the node's last report (a heartbeat request or a batch report) took from send
        #: to answer, or to its failure (s, rounded to 0.1 s, at most ``MAX_REPORT_LATENCY_S``; 0
        #: before the first). The next heartbeat carries it (docs/AGENT.md §3): the agent waits for
        #: each answer before its next report, so this is how far apart the server reads them.
        self.report_latency_s = 0.0
        #: Reports timed so far (:meth:`timed`).
        self.reports = 0
        self.dropped = 0  # events dropped because the outbox overflowed
        self.rejected = 0  # events the server refused with a 4xx

    @property
    def transport(self) -> Transport:
        """Where the reports go (the job logs of ``agent.joblogs`` take the same way)."""
        return self._transport

    @property
    def pending(self) -> int:
        """Events waiting in the outbox."""
        return len(self._outbox)

    @property
    def retry_at(self) -> float:
        """When the next delivery attempt may happen (s, agent clock)."""
        return self._retry_at

    def submit(self, events: Iterable[JobEventReport]) -> None:
        """Queue ``events`` behind those already waiting (nothing is sent here)."""
        for event in events:
            if event.event == "progress":
                # An unsent progress of the same job is superseded by this one.
                for old in self._outbox:
                    if old.job_id == event.job_id and old.event == "progress":
                        self._outbox.remove(old)
                        break
            self._outbox.append(event)
            if len(self._outbox) > self._max_events:
                self._drop_one()

    def _drop_one(self) -> None:
        victim = next((e for e in self._outbox if e.event == "progress"), self._outbox[0])
        self._outbox.remove(victim)
        self.dropped += 1
        log.error(
            "outbox full (%d events): dropped %s of job %d", self._max_events, victim.event, victim.job_id
        )

    def flush(self, now: float) -> int:
        """Send waiting events in order until the outbox is empty or the server is unreachable.

        Returns how many were delivered. Does nothing before :attr:`retry_at`. Raises
        :class:`TokenRefused` on a 401 (the event stays at the head of the outbox).
        """
        if now < self._retry_at:
            return 0
        sent = 0
        while self._outbox:
            event = self._outbox[0]
            try:
                self._transport.post(event.path, event.payload())
            except StopReporting:
                raise  # nothing will land: the event stays, the agent stops
            except TransportError as exc:
                if exc.retryable:
                    self._fail(now, exc)
                    return sent
                self._refused(event, exc)
            else:
                sent += 1
                self._succeed()
            self._outbox.popleft()
        return sent

    def head(self, limit: int) -> list[JobEventReport]:
        """The ``limit`` oldest waiting events, left in the outbox (a batch report takes them,
        ``agent.batch``, then :meth:`settle` removes those the server answered)."""
        return [event for _, event in zip(range(limit), self._outbox, strict=False)]

    def settle(self, count: int, refused: dict[int, str]) -> None:
        """The server answered the ``count`` oldest events (those from :meth:`head`): remove
        them; ``refused`` maps the position of each one it refused for good (a 4xx) to its
        message, logged and counted as :meth:`flush` does."""
        for i in range(count):
            event = self._outbox.popleft()
            if i in refused:
                self._refused(event, refused[i])

    def _refused(self, event: JobEventReport, why: object) -> None:
        """Count and log ``event``, refused for good by the server (a 4xx; ``why``: its answer)."""
        self.rejected += 1
        log.warning(
            "server refused %s of job %d (generation %d): %s; dropped",
            event.event,
            event.job_id,
            event.generation,
            one_line(why),
        )

    def landed(self, now: float) -> None:
        """A report reached the server at ``now``: the backoff ends (as a heartbeat's does)."""
        self._succeed()
        self._retry_at = now

    def failed(self, now: float, exc: TransportError) -> None:
        """A report did not reach the server (retryable ``exc``): back off as :meth:`flush` does."""
        self._fail(now, exc)

    def timed(self, send: Callable[[], T]) -> T:
        """``send()``'s result; the time it took (this reporter's clock, until it returned or
        raised) becomes :attr:`report_latency_s`. For the node's reports: heartbeats, batch
        reports (``agent.batch``)."""
        start = self._clock()
        try:
            return send()
        finally:
            self.reports += 1
            self.report_latency_s = bounded_latency(self._clock() - start)

    def waited(self, took_s: float) -> None:
        """The node's last report waited ``took_s`` s in all, longer than its own request (one
        ``--fleet`` loop sends its nodes' reports in turn, :class:`~agent.runner.Runner`):
        :attr:`report_latency_s` becomes that when it is longer."""
        self.report_latency_s = max(self.report_latency_s, bounded_latency(took_s))

    def stamped(self, heartbeat: Heartbeat) -> Heartbeat:
        """``heartbeat`` carrying :attr:`report_latency_s`, the previous report's."""
        return replace(heartbeat, report_latency_s=self.report_latency_s)

    def heartbeat(self, heartbeat: Heartbeat, now: float) -> bool:
        """Send one heartbeat now (never queued: only the latest one matters), with the previous
        report's latency (:meth:`stamped`), timed (:meth:`timed`).

        A heartbeat that lands also ends the backoff, so waiting events go out at once.
        Returns whether it landed. Raises :class:`TokenRefused` on a 401, :class:`WrongApi` on a
        404.
        """
        beat = self.stamped(heartbeat)
        try:
            self.timed(lambda: self._transport.post(beat.path, beat.payload()))
        except StopReporting:
            raise
        except TransportError as exc:
            if exc.status == 404:  # the one path a server always has: --api is not its URL
                raise WrongApi(one_line(exc)) from None
            if exc.retryable:
                self._fail(now, exc)
            else:
                log.warning("server refused the heartbeat of %s: %s", heartbeat.node, one_line(exc))
            return False
        self._succeed()
        self._retry_at = now
        return True

    def _fail(self, now: float, exc: TransportError) -> None:
        if now >= self._retry_at:  # one failure per backoff window doubles it once
            log.warning(
                "server unreachable (%s); %d events waiting, retry in %.0f s",
                one_line(exc),
                len(self._outbox),
                self._backoff_s,
            )
            self._retry_at = now + self._backoff_s
            self._backoff_s = min(self._backoff_s * 2, self._backoff_max_s)

    def _succeed(self) -> None:
        self._backoff_s = self._backoff_first_s
