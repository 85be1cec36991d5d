"""Progress bars of the simulator's long runs (tqdm on stderr), imported only when shown.

tqdm's import (with the package metadata it reads for its version) is about a tenth of a second,
half of a small simulation's start-up; a run without a bar (``--no-progress``, a sweep's worker,
a test) never pays it.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol


class ProgressBar(Protocol):
    """What the simulator asks of a bar: count ``n`` more done, and close it."""

    def update(self, n: float | None = 1) -> Any: ...

    def close(self) -> None: ...


class NoBar:
    """A bar that shows nothing."""

    def update(self, n: float | None = 1) -> None:
        """Count nothing."""

    def close(self) -> None:
        """Nothing to close."""


def progress_bar(total: int, desc: str, *, shown: bool, unit: str = "it", leave: bool = True) -> ProgressBar:
    """A tqdm bar of ``total`` steps on stderr (redrawn at most twice a second) when ``shown``,
    else a :class:`NoBar`."""
    if not shown:
        return NoBar()
    from tqdm import tqdm  # here, not at the top: see the module docstring

    bar: ProgressBar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, mininterval=0.5, leave=leave)
    return bar
