"""Jobs' output on the node: kept per run, bounded, optionally in rotated local files, and shipped
to the server in chunks (docs/AGENT.md §2a).

- :class:`JobLog`: the output of one run of one job (``node/g<generation>``, the generation of
  the ``start`` that began it). Lines are buffered until the server has them; past
  ``max_buffer_chars`` unsent characters the oldest are dropped (the server then notes how many
  never arrived), so a server that is down costs bounded memory. With a folder, every line is also
  written to ``<folder>/job-<id>.log``, rotated at ``file_max_bytes`` with ``file_backups`` older
  files (``.1`` newest … ``.N``), like ``logging.handlers.RotatingFileHandler``.
- :class:`LogBook`: the logs of one node's runs; :class:`LogShipper` POSTs their chunks in order,
  one run's chunk at a time, retrying after a backoff while the server is unreachable.

Offsets count characters of a run's output. Units: characters, bytes (files), seconds (s).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.reporter import StopReporting, Transport, TransportError, one_line

log = logging.getLogger(__name__)

#: Most characters of one chunk (the server's bound: its JSON stays under a 64 KiB body).
MAX_CHUNK_CHARS = 4000
#: Longest line kept (characters); the rest of a longer one is cut **(ours)**.
MAX_LINE_CHARS = 16_000


@dataclass(frozen=True, slots=True)
class LogChunk:
    """``data``: characters ``offset`` … ``offset + len(data)`` of run ``run``'s output of job
    ``job_id``; ``eof``: nothing follows. POSTed to ``/api/v1/agent/jobs/{job_id}/logs/``."""

    job_id: int
    run: str
    offset: int
    data: str
    eof: bool

    @property
    def path(self) -> str:
        """The API path (below ``--api``) this chunk goes to."""
        return f"/api/v1/agent/jobs/{self.job_id}/logs/"

    def payload(self) -> dict[str, Any]:
        """The JSON body."""
        return {"run": self.run, "offset": self.offset, "data": self.data, "eof": self.eof}


class RotatingFile:
    """Lines appended to ``path``; past ``max_bytes`` the file becomes ``path.1`` (``.1`` →
    ``.2`` …, the oldest of ``backups`` dropped) and a new one starts. Write errors are logged once
    and writing stops (the server copy is unaffected)."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._size = path.stat().st_size if path.exists() else 0
        self._broken = False

    def write(self, text: str) -> None:
        if self._broken:
            return
        raw = text.encode("utf-8", errors="replace")
        try:
            if self._size and self._size + len(raw) > self.max_bytes:
                self._rotate()
            with self.path.open("ab") as f:
                f.write(raw)
            self._size += len(raw)
        except OSError as exc:
            self._broken = True
            log.error("cannot write job output to %s: %s; local copy stopped", self.path, exc)

    def _rotate(self) -> None:
        for i in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
        if self.backups > 0:
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._size = 0


class JobLog:
    """The output of one run (see the module docstring). ``file``: an optional local copy. Safe to
    write from one thread while another ships."""

    def __init__(
        self, job_id: int, run: str, max_buffer_chars: int, file: RotatingFile | None = None
    ) -> None:
        self.job_id = job_id
        self.run = run
        self.max_buffer_chars = max_buffer_chars
        self.file = file
        self.sent = 0  # characters of the run the server has
        self._unsent = ""  # not yet delivered, from character ``_start`` of the run on
        self._start = 0  # past ``sent`` when the buffer overflowed (those characters are lost)
        self.closed = False
        self.eof_sent = False
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        """Append one line of output (a newline is added)."""
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [line cut at {MAX_LINE_CHARS} characters]"
        text = line.replace("\x00", "\ufffd") + "\n"  # NUL is not text (the database refuses it)
        if self.file is not None:
            self.file.write(text)
        with self._lock:
            self._unsent += text
            excess = len(self._unsent) - self.max_buffer_chars
            if excess > 0:
                self._unsent = self._unsent[excess:]
                self._start += excess

    def close(self) -> None:
        """The run ended: its output is complete (the last chunk carries ``eof``)."""
        with self._lock:
            self.closed = True

    @property
    def done(self) -> bool:
        """Whether everything, the end included, has reached the server."""
        with self._lock:
            return self.closed and self.eof_sent and not self._unsent

    def next_chunk(self) -> LogChunk | None:
        """The next chunk to send (cut after a newline when possible), or ``None``."""
        with self._lock:
            if not self._unsent and (not self.closed or self.eof_sent):
                return None
            data = self._unsent[:MAX_CHUNK_CHARS]
            if len(self._unsent) > MAX_CHUNK_CHARS:
                cut = data.rfind("\n")
                if cut > 0:
                    data = data[: cut + 1]
            last = len(data) == len(self._unsent)
            return LogChunk(self.job_id, self.run, self._start, data, self.closed and last)

    def delivered(self, chunk: LogChunk) -> None:
        """The server has ``chunk``."""
        end = chunk.offset + len(chunk.data)
        with self._lock:
            if end > self._start:
                self._unsent = self._unsent[end - self._start :]
                self._start = end
            self.sent = max(self.sent, end)
            if chunk.eof and not self._unsent:
                self.eof_sent = True


class LogBook:
    """The job logs of one node. ``folder``: where local copies go (``None``: none); a log keeps at
    most ``max_buffer_chars`` unsent characters; files rotate at ``file_max_bytes``, keeping
    ``file_backups``."""

    def __init__(
        self,
        folder: str | Path | None = None,
        max_buffer_chars: int = 1_000_000,
        file_max_bytes: int = 10_000_000,
        file_backups: int = 3,
    ) -> None:
        self.folder = Path(folder) if folder else None
        self.max_buffer_chars = max_buffer_chars
        self.file_max_bytes = file_max_bytes
        self.file_backups = file_backups
        self._logs: list[JobLog] = []
        self._lock = threading.Lock()

    def open(self, job_id: int, run: str) -> JobLog:
        """A new log for run ``run`` of ``job_id`` (its local file, if any, continues the job's)."""
        file = None
        if self.folder is not None:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                file = RotatingFile(self.folder / f"job-{job_id}.log", self.file_max_bytes, self.file_backups)
            except OSError as exc:
                log.error("cannot keep job output in %s: %s", self.folder, exc)
        job_log = JobLog(job_id, run, self.max_buffer_chars, file)
        with self._lock:
            self._logs.append(job_log)
        return job_log

    def pending(self) -> list[JobLog]:
        """Logs with something left to send, oldest first; finished ones are forgotten."""
        with self._lock:
            self._logs = [j for j in self._logs if not j.done]
            return list(self._logs)

    def drop(self, job_log: JobLog) -> None:
        """Forget ``job_log`` (the server refused it for good)."""
        with self._lock:
            if job_log in self._logs:
                self._logs.remove(job_log)


class LogShipper:
    """Delivers the chunks of :class:`LogBook` s through a :class:`~agent.reporter.Transport`.

    At most ``max_chunks`` per :meth:`ship`; a connection error, 5xx, 408 or 429 ends the pass and
    the next one waits ``backoff_s`` (doubling up to ``backoff_max_s``); another 4xx drops that
    run's log (the job is gone, or was never placed here) with a warning."""

    def __init__(
        self, transport: Transport, max_chunks: int = 50, backoff_s: float = 1.0, backoff_max_s: float = 60.0
    ) -> None:
        self._transport = transport
        self._max_chunks = max_chunks
        self._backoff_first_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._backoff_s = backoff_s
        self._retry_at = float("-inf")

    def ship(self, books: Iterable[LogBook], now: float) -> int:
        """Send what is waiting in ``books`` at agent time ``now`` (s); the number of chunks sent."""
        if now < self._retry_at:
            return 0
        sent = 0
        for book in books:
            for job_log in book.pending():
                while sent < self._max_chunks:
                    chunk = job_log.next_chunk()
                    if chunk is None:
                        break
                    try:
                        self._transport.post(chunk.path, chunk.payload())
                    except StopReporting:
                        raise  # the agent stops (agent.cli); the chunk is not dropped
                    except TransportError as exc:
                        if exc.retryable:
                            self._retry_at = now + self._backoff_s
                            self._backoff_s = min(self._backoff_s * 2, self._backoff_max_s)
                            return sent
                        log.warning(
                            "server refused the output of job %d (%s): %s",
                            chunk.job_id,
                            chunk.run,
                            one_line(exc),
                        )
                        book.drop(job_log)
                        break
                    job_log.delivered(chunk)
                    self._backoff_s = self._backoff_first_s
                    sent += 1
        return sent
