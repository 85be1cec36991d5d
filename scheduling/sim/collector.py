"""The cyclic garbage collector's young-generation threshold, raised while a simulation runs.

Why: a simulation allocates and frees many short-lived containers every round (snapshots, a
policy's sorted queues, pair plans, heap entries), so with CPython's default threshold (a young
collection every 700 net allocations of tracked objects) it triggers thousands of young
collections, a tenth of them of the middle generation, and a few full ones that walk
every long-lived object (the trace's jobs, their states, the profile, whatever the caller holds).
Almost nothing of it is cyclic garbage: reference counting frees it. On the whole
``chronus-philly-mix1.csv`` under SJF-BSBF (16 × 8) a run made 1,785 young, 162 middle and 9 full
collections, about 1.7 CPU-s inside the collector; with the young threshold at
:data:`SIM_GEN0_THRESHOLD`, 120, 11 and 1 collections and 0.4–0.6 s (docs/PERFORMANCE.md §5,
"Garbage collection"), with the same peak memory.

Why a threshold and neither of the alternatives measured there:

- ``gc.disable()`` for the run is no faster, and would leave a policy that makes cyclic garbage
  (a third-party one, say) unbounded for a whole trace;
- pausing around each ``policy.decide`` only (what the service's round does) still collects
  after every round's decision and saved a third of it;
- ``gc.freeze()`` only makes the full collections cheaper (a few), and cannot be undone without
  also unfreezing what a caller froze before (``gc.unfreeze`` moves every frozen object back),
  e.g. a web worker's start-up objects (``gunicorn.conf.py``).

The simulator also runs inside other processes (the service, the demo, the tests), so the
threshold is restored when the last running simulation ends, exception or not. Simulations in
several threads of one process share the count: the first to start saves the thresholds, the
last to end restores them, so interleaved ends cannot leave the raised one behind. Whether the
collector is enabled and what is frozen are left as they are.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: young-generation threshold while a simulation runs (CPython's default is 700); the middle and
#: old thresholds are kept, so a full collection still follows every 100 young ones at most.
SIM_GEN0_THRESHOLD = 10_000

_lock = threading.Lock()
_active = 0  # simulations running in this process
_saved: tuple[int, ...] = ()  # the thresholds the first of them found


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Within the block, young collections every :data:`SIM_GEN0_THRESHOLD` allocations (never
    fewer than the caller's own threshold asks for); on leaving the last such block of the
    process, ``gc.get_threshold()`` is what it was when the first began."""
    global _active, _saved
    with _lock:
        if _active == 0:
            _saved = gc.get_threshold()
            gen0, *older = _saved
            # a caller's threshold of 0 (the collector's automatic runs off) or above ours is kept
            if 0 < gen0 < SIM_GEN0_THRESHOLD:
                gc.set_threshold(SIM_GEN0_THRESHOLD, *older)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                gc.set_threshold(*_saved)
