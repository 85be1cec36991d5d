"""The web worker's garbage collector: full collections between requests, never inside one.

Why: a full collection (the oldest generation) walks every tracked object the worker holds that
was not frozen at start-up — the dashboard's caches of rounds, GPU cells and table rows, tens of
thousands — and took 10-20 ms. CPython starts one inside whatever allocation crosses its
threshold, so the request that happened to be running paid it: those were the dashboard's p95
outliers after a round (docs/PERFORMANCE.md, "Dashboard", the tenth pass). Here a gunicorn worker
keeps CPython's young collections (generations 0 and 1) as they are, turns off the automatic
full ones, and runs the full collection itself from gunicorn's ``post_request`` hook, after the
response was written (gthread: ``resp.close()`` comes before the hook), when CPython would have
considered one (:data:`YOUNG_COLLECTIONS` collections of generation 1 since the last full one) and
at most once per :data:`MIN_INTERVAL_S`. Cyclic garbage that reached the oldest generation then
lives at most that much longer; a request that another thread of the worker is serving at that
moment still waits for the collection (it holds the GIL), as it would have before.

Only the web server's workers do this (``gunicorn.conf.py``); Celery's rounds pause the collector
around a decision themselves (``scheduling/service/rounds.py``) and the simulator tunes it for its
own run (``scheduling/sim/collector.py``).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

#: Collections of generation 1 since the last full one after which CPython would consider a full
#: collection (its default third threshold, ``gc.get_threshold()[2]``).
YOUNG_COLLECTIONS = 10
#: The fewest seconds between two full collections of one worker: at most ~20 ms a 10 s under any
#: load (0.2 % of a core), and cyclic garbage in the oldest generation freed within that time.
MIN_INTERVAL_S = 10.0
#: A third threshold no count of generation-1 collections reaches: no automatic full collection.
NEVER = 2**31 - 1


def after_start() -> None:
    """At a worker's start, once the application is loaded: collect, freeze what survives (the
    start-up objects: modules, settings, URL patterns, models, which a full collection then never
    walks) and turn off automatic full collections (:func:`collect_between_requests` runs them)."""
    gc.collect()
    gc.freeze()
    young0, young1, _ = gc.get_threshold()
    gc.set_threshold(young0, young1, NEVER)


class FullCollections:
    """Runs a full collection when one is due (see :meth:`__call__`); one per worker process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, min_interval_s: float = MIN_INTERVAL_S):
        self.clock = clock
        self.min_interval_s = min_interval_s
        self.last_s = -float("inf")  # clock time (s) of the last full collection run here
        self._lock = threading.Lock()  # one thread of a worker collects; the others go on

    def __call__(self) -> bool:
        """A full collection if CPython would have considered one by now (:data:`YOUNG_COLLECTIONS`
        generation-1 collections since the last full one, ``gc.get_count()[2]``) and the last one
        run here is at least ``min_interval_s`` old; whether it ran. A thread finding another one
        collecting returns at once."""
        if gc.get_count()[2] < YOUNG_COLLECTIONS or self.clock() - self.last_s < self.min_interval_s:
            return False
        if not self._lock.acquire(blocking=False):
            return False
        try:
            gc.collect()
            self.last_s = self.clock()
            return True
        finally:
            self._lock.release()


#: The worker's full collections (gunicorn's ``post_request`` hook calls it).
collect_between_requests = FullCollections()
