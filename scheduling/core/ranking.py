"""Pending jobs kept sorted between rounds, updated by what changed (pure Python).

A preemptive policy (SRTF, Tiresias) ranks every pending job every round. Re-sorting thousands
of pending jobs each round is what made Tiresias the slowest policy (issue 16: 13.3 M key calls
over 1,920 rounds on 20,000 jobs). A :class:`PendingRanking` keeps the pending jobs sorted by
the policy's key from one round to the next and recomputes a job's key only when

- the job is new to the queue, or the driver handed a different ``Job`` object for it (a
  preempted job comes back with new progress; the simulator reuses the objects of jobs that
  stayed pending; a different but equal object keeps its key), or
- the instant up to which the policy declared the key constant has passed (``valid_until``:
  Tiresias' starvation promotion; ``inf`` for SRTF, whose pending keys never change).

So :meth:`PendingRanking.update` returns exactly ``sorted((key(j, now), j) for j in pending)``
(keys are unique: they end with the job id), which the tests check against the from-scratch sort
on random traces. It is a cache owned by one policy object: it changes no decision. Each update
compares the round's pending jobs with the last round's at C speed, run by run, and costs O(log
n) and a list insertion per new, gone, changed or expired job.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter

from scheduling.core.types import Job, JobId, Snapshot

Key = tuple
_first = itemgetter(0)
_second = itemgetter(1)
_job_id = attrgetter("id")
KeyFn = Callable[[Job, float], Key]
"""``key(job, now)``: the policy's ranking key of a pending job at ``now`` (s), ending with the id."""
ValidFn = Callable[[Job, float], float]
"""``valid_until(job, now)``: the last instant (s) up to which ``key(job, ·)`` equals
``key(job, now)`` while the job stays pending (``inf``: forever)."""


def forever(job: Job, now: float) -> float:
    """:data:`ValidFn` of a key that never changes while the job is pending (SRTF's ``P_j``)."""
    return math.inf


def common_run(a: Sequence[Job], i: int, b: Sequence[Job], j: int) -> int:
    """Length of the longest run ``a[i:i+L] == b[j:j+L]`` (each pair the same or an equal job).

    Compared by slices (C speed: the same object compares in one step), galloping then
    halving: O(L) element comparisons and O(log L) slices."""
    limit = min(len(a) - i, len(b) - j)
    length, step = 0, 64
    while length < limit:  # gallop
        step = min(step, limit - length)
        if a[i + length : i + length + step] != b[j + length : j + length + step]:
            break
        length += step
        step *= 2
    else:
        return length
    while step > 1:  # the first difference lies within the next `step` elements
        half = step // 2
        if a[i + length : i + length + half] == b[j + length : j + length + half]:
            length += half
            step -= half
        else:
            step = half
    return length


class PendingRanking:
    """The pending jobs of the latest round in ascending key order (see the module docstring).

    ``key`` and ``valid_until`` must not depend on anything but the job and ``now``; a change of
    anything else they read (a new configuration) needs a new object (:meth:`reset`).
    """

    def __init__(self, key: KeyFn, valid_until: ValidFn = forever) -> None:
        self.key = key
        self.valid_until = valid_until
        # the key as a function of the job alone, when it is one (:meth:`timeless`)
        self._job_key: Callable[[Job], Key] | None = None
        self.reset()

    @classmethod
    def timeless(cls, key: Callable[[Job], Key]) -> PendingRanking:
        """A ranking by ``key(job)``, a key that never changes while the job is pending (SJF's
        ``P_j``): the same ranking as ``PendingRanking(lambda job, now: key(job))``, with the
        first sort of a queue computing its keys without a call per job of our own."""
        ranking = cls(lambda job, now: key(job))
        ranking._job_key = key
        return ranking

    def reset(self) -> None:
        """Forget everything (the next :meth:`update` sorts from scratch)."""
        self.keys: list[Key] = []
        self.jobs: list[Job] = []
        self._entries: dict[JobId, tuple[Job, Key, float]] = {}  # id → (job, key, valid until)
        self._expiry: list[tuple[float, JobId, Key]] = []  # heap of (valid until, id, key)
        self._previous: Sequence[Job] = ()
        self._started: set[JobId] = set()
        self._now = -math.inf

    def started(self, job_ids: set[JobId]) -> None:
        """The jobs the policy started this round: a hint where the next round's pending jobs
        differ (a wrong hint costs time, never a wrong ranking)."""
        self._started = job_ids

    def current(self, pending: Sequence[Job], now: float) -> bool:
        """Whether the ranking is that of exactly these pending jobs at ``now`` (the last update)."""
        return pending is self._previous and now == self._now

    def next_expiry(self) -> float:
        """The earliest instant (s) after which a pending job's key changes with time alone
        (its ``valid_until``; ``inf``: none), for the jobs of the last update."""
        expiry, entries = self._expiry, self._entries
        while expiry:
            until, jid, key = expiry[0]
            entry = entries.get(jid)
            if entry is not None and entry[1] == key and entry[2] == until:
                return until
            heapq.heappop(expiry)  # a job gone, or re-keyed since
        return math.inf

    def _remove(self, key: Key) -> None:
        i = bisect_left(self.keys, key)
        del self.keys[i]
        del self.jobs[i]

    def _add(self, job: Job, now: float) -> None:
        key = self.key(job, now)
        i = bisect_left(self.keys, key)
        self.keys.insert(i, key)
        self.jobs.insert(i, job)
        until = self.valid_until(job, now)
        self._entries[job.id] = (job, key, until)
        if until < math.inf:
            heapq.heappush(self._expiry, (until, job.id, key))

    def _build(self, pending: Sequence[Job], now: float) -> None:
        """Rank ``pending`` from scratch: one sort, O(n log n), instead of n insertions."""
        keys = (
            [self.key(job, now) for job in pending] if self._job_key is None else map(self._job_key, pending)
        )
        # keys are unique (they end with the id): the jobs are never compared
        ranked = sorted(zip(keys, pending, strict=True), key=_first)
        self.keys = list(map(_first, ranked))
        self.jobs = list(map(_second, ranked))
        self._expiry = []
        if self.valid_until is forever:  # no key ever expires: no call per job, no heap
            values = zip(self.jobs, self.keys, repeat(math.inf), strict=False)  # repeat: as long as needed
            self._entries.update(zip(map(_job_id, self.jobs), values, strict=True))
        else:
            for key, job in ranked:
                until = self.valid_until(job, now)
                self._entries[job.id] = (job, key, until)
                if until < math.inf:
                    self._expiry.append((until, job.id, key))
            heapq.heapify(self._expiry)
        self._previous, self._started = pending, set()

    def update(self, pending: Sequence[Job], now: float) -> tuple[list[Key], list[Job]]:
        """Bring the ranking to ``pending`` at ``now`` (s); returns ``(keys, jobs)``, both in
        ascending key order (the lists are the ranking's own: read them, do not change them).

        The round's jobs are aligned with the last round's by runs of equal jobs
        (:func:`common_run`), stepping over the jobs started in between (:meth:`started`); only
        what is left over (new, gone or changed jobs) and keys that time has changed cost Python
        work: O(changes · log n) plus O(n) element comparisons at C speed."""
        if now < self._now:  # a new run (time went back): nothing cached is valid
            self.reset()
        self._now = now
        if not self._entries:  # nothing kept (first round, or an empty queue): one sort
            self._build(pending, now)
            return self.keys, self.jobs
        before, started, entries = self._previous, self._started, self._entries
        i = j = 0
        skipped: list[Job] = []
        while True:
            run = common_run(before, i, pending, j)
            i, j = i + run, j + run
            if i < len(before) and before[i].id in started:
                skipped.append(before[i])  # started last round: gone from the queue
                i += 1
                continue
            break
        gone: dict[JobId, Job] = {job.id: job for job in before[i:]}
        # before the round's leftovers are matched: a job said to have started may be pending
        # again (a start the service could not dispatch) and must keep its one entry
        for job in skipped:
            gone[job.id] = job
        for job in pending[j:]:
            old = gone.pop(job.id, None)
            if old is not None:
                entry = entries[job.id]
                if now <= entry[2] and (old is job or old == job):
                    entries[job.id] = (job, entry[1], entry[2])
                    continue
                self._remove(entry[1])
            self._add(job, now)
        for jid in gone:
            left = entries.pop(jid, None)
            if left is not None:
                self._remove(left[1])
        expiry = self._expiry
        while expiry and expiry[0][0] < now:  # keys that time has changed
            _, jid, key = heapq.heappop(expiry)
            kept = entries.get(jid)
            if kept is not None and kept[1] == key:
                self._remove(key)
                self._add(kept[0], now)
        self._previous, self._started = pending, set()
        return self.keys, self.jobs

    def order(self, snapshot: Snapshot, incremental: bool, key: Callable[[Job], Key]) -> Sequence[Job]:
        """The snapshot's pending jobs in ascending ``key`` order: kept here (:meth:`update`) when
        ``incremental``, else sorted from scratch (``key`` must then be this ranking's key at
        ``snapshot.now``); the same sequence either way. For policies whose pending keys never
        change with time alone (FIFO's arrival order, SJF's ``P_j``)."""
        if incremental:
            return self.update(snapshot.pending, snapshot.now)[1]
        return sorted(snapshot.pending, key=key)
