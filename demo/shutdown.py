"""Stopping the demo's threads within one time budget.

Why one budget and not a timeout per thread: on Ctrl-C the demo joins its replay, rounds and
agents threads, then its web server's 16 workers; with a timeout each (20 s, 5 s), a machine so
loaded that several threads are still inside a request could hold the exit for minutes (3 × 20 +
16 × 5 s) — a Ctrl-C that seems not to work. Every thread it joins is a daemon, so the process
may exit with one still running.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Protocol


class Joinable(Protocol):
    """What :func:`join_within` needs of a thread."""

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end, at most ``timeout`` s."""


def join_within(
    threads: Iterable[Joinable], budget_s: float, clock: Callable[[], float] = time.monotonic
) -> None:
    """Join ``threads`` in order, all of them within ``budget_s`` seconds of the call (on
    ``clock``, s): each waits at most what is left of the budget (0 once it is spent: a thread
    that has ended is still joined at once). Raises ``ValueError`` for a negative budget."""
    if budget_s < 0:
        raise ValueError(f"budget_s must be 0 or more, got {budget_s}")
    deadline = clock() + budget_s
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - clock()))
