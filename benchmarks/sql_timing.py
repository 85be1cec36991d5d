"""Every SQL statement of this process timed, per window of wall time: which statements' time per
call grows as a long run goes on (docs/PERFORMANCE.md §10, the fall after about 10,000 jobs).

:class:`SqlTiming` adds a wrapper to every database connection Django opens from then on (and to
the current thread's), through Django's ``connection.execute_wrappers`` (the list its
``execute_wrapper()`` context manager appends to) and the ``connection_created`` signal. Each
call's wall time (``perf_counter``: waits for locks, the server and the GIL included) is added to
its statement's text — the SQL as Django sends it, with placeholders, so each query is one entry
whatever its parameters; runs of ``%s, %s, …`` count as one — and to the window of
``window_s`` seconds it started in.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

#: A run of placeholders (an ``IN`` list, a multi-row ``VALUES``) folded into one.
PLACEHOLDERS = re.compile(r"%s(?:, %s)+")


def statement_key(sql: str) -> str:
    """The statement ``sql`` with its runs of placeholders folded (``IN (%s, %s)`` and ``IN (%s,
    %s, %s)`` are the same statement)."""
    return PLACEHOLDERS.sub("%s, …", sql)


class SqlTiming:
    """Times every statement of this process (module docstring) from :meth:`start` on."""

    def __init__(self, window_s: float = 30.0) -> None:
        if not window_s > 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.window_s = window_s
        self._lock = threading.Lock()
        #: statement → window number → [calls, wall s]
        self.calls: dict[str, dict[int, list[float]]] = defaultdict(dict)
        self._t0 = time.monotonic()

    def wrapper(self, execute: Callable, sql: str, params: Any, many: bool, context: dict) -> Any:
        """An ``execute_wrapper`` (Django's signature): run the statement, add its time."""
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent = time.perf_counter() - start
            window = int((time.monotonic() - self._t0) // self.window_s)
            with self._lock:
                cell = self.calls[statement_key(sql)].setdefault(window, [0, 0.0])
                cell[0] += 1
                cell[1] += spent

    def _connected(self, sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(self.wrapper)

    def start(self) -> SqlTiming:
        """Wrap the current thread's connection and every connection opened from now on."""
        from django.db import connection
        from django.db.backends.signals import connection_created

        self._t0 = time.monotonic()
        connection.execute_wrappers.append(self.wrapper)
        connection_created.connect(self._connected, weak=False)
        return self

    def report(self, top: int = 10, width: int = 160) -> str:
        """The ``top`` statements by wall time in all: total (s), calls, and the time per call (ms)
        in each window that had calls, first to last; each statement's first ``width``
        characters."""
        with self._lock:
            rows = [(sum(c[1] for c in w.values()), sql, dict(w)) for sql, w in self.calls.items()]
        rows.sort(key=lambda r: -r[0])
        lines = [f"SQL statements by wall time in all; ms per call in each {self.window_s:g} s window:"]
        for total, sql, windows in rows[:top]:
            calls = sum(int(c[0]) for c in windows.values())
            per = " ".join(f"{1000 * windows[w][1] / windows[w][0]:.0f}" for w in sorted(windows))
            lines.append(f"  {total:8.1f} s {calls:7d} calls: {per}\n      {sql[:width]}")
        return "\n".join(lines)


if __name__ == "__main__":  # a module the benchmarks import: run, it says so (and answers --help)
    from cli_args import module_only

    raise SystemExit(module_only(__file__, __doc__))
