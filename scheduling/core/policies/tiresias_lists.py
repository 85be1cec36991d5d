"""Tiresias with the queue lists of Tiresias' (and Muri's) simulator: ``demoted="back"``.

The peers' simulators (``dlas_sim_jobs`` in Tiresias' ``run_sim.py`` and its fork in Muri's;
the SJF-BSBF authors' ``Tiresias_jobs``) keep one list per queue and, at every scheduling pass:

1. a running job whose service since its last promotion reaches its queue's threshold moves
   to the **back** of the next queue's list (behind that queue's pending jobs);
2. with the guard on (``solve_starvation > 0``), a pending job of a lower queue that has been
   pending, since its last promotion and while it had run since, at least ``factor ×`` its
   executed time since that promotion is promoted: its service and that pending time are reset
   and it goes to the back of the highest queue;
3. arrivals join the back of the highest queue;
4. the lists are walked queue by queue; a job is kept or started while its gang fits, else it
   waits (a running one is preempted);
5. in each list the pending jobs are moved behind the running ones, keeping their order.

So a demoted job can be preempted by the lower queue's pending jobs at the next pass, and only
then settles ahead of them. This history cannot be derived from a snapshot, so
:class:`TiresiasLists` keeps the lists (and each job's service and pending time since its last
promotion) between rounds: the decisions depend on the rounds seen, as in the peers'
simulators. A job it has not seen before (a fresh object in the middle of a run, e.g. a new
service process) enters the list of its service's queue, running jobs first, then by submit
time. Order of simultaneous moves: submit time, then id (the peers' ``runnable_jobs`` order).
Times in s; service in GPU-s or wall s (``TiresiasConfig.service``).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate, chain, filterfalse
from operator import attrgetter, itemgetter

from scheduling.core.preemptive import preemptive_exclusive
from scheduling.core.types import Job, JobId, Profile, RoundDecisions, Snapshot, TiresiasConfig

_job_id = attrgetter("id")
_job = attrgetter("job")
_first = itemgetter(0)


@dataclass(slots=True)
class ListEntry:
    """What the lists keep of one job: its queue ``q``, its attained GPU-s at its last
    promotion ``base_gpu_s`` (0 before any) and its pending time since then ``pending_s`` (s,
    counted only once it has run since the promotion)."""

    q: int
    base_gpu_s: float = 0.0
    pending_s: float = 0.0


def _by_id(jobs: tuple[Job, ...]) -> dict[JobId, Job]:
    """``{job.id: job}`` at C speed (``map``/``zip``): it runs over every pending job each round."""
    return dict(zip(map(_job_id, jobs), jobs, strict=True))


class TiresiasLists:
    """The queue lists of one Tiresias policy object (module docstring)."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.reset(None)

    def reset(self, config: TiresiasConfig | None) -> None:
        """Forget every list (a new run, or a new configuration)."""
        self.config = config
        self.now = -math.inf
        self.entries: dict[JobId, ListEntry] = {}
        self.dirty: set[JobId] = set()  # running jobs moved into a list since its last partition
        levels = len(config.thresholds) + 1 if config else 1
        self.queues: list[dict[JobId, None]] = [{} for _ in range(levels)]

    def _service(self, job: Job, entry: ListEntry) -> float:
        """Service since the last promotion: GPU-s, or wall s."""
        assert self.config is not None
        gpu_s = job.attained_gpu_s - entry.base_gpu_s
        return gpu_s if self.config.service == "gpu_s" else gpu_s / max(job.gpus, 1)

    def _move(self, jid: JobId, entry: ListEntry, q: int) -> None:
        del self.queues[entry.q][jid]
        entry.q = q
        self.queues[q][jid] = None

    def observe(
        self,
        snapshot: Snapshot,
        pending: dict[JobId, Job] | None = None,
        running: dict[JobId, Job] | None = None,
    ) -> None:
        """Bring the lists to ``snapshot``: drop finished jobs, add new ones, demote and
        promote (steps 1–3 of the module docstring). The running jobs are looked at one by one;
        the pending ones only with the guard on (their pending time counts). ``pending``,
        ``running``: the snapshot's pending and running jobs by id (in its order), when the
        caller has them already."""
        config = snapshot.config.tiresias
        now = snapshot.now
        if config != self.config or now < self.now:
            self.reset(config)
        thresholds = config.thresholds
        last_q = len(thresholds)
        previous, self.now = self.now, now
        entries = self.entries
        if pending is None:
            pending = _by_id(snapshot.pending)
        if running is None:
            running = {rj.job.id: rj.job for rj in snapshot.running}
        new = (pending.keys() - entries.keys()) | (running.keys() - entries.keys())
        # the lists hold every present job not new, so as many gone ones as they hold beyond those
        if len(entries) > len(pending) + len(running) - len(new):
            for jid in entries.keys() - pending.keys() - running.keys():  # finished or gone
                del self.queues[entries.pop(jid).q][jid]
                self.dirty.discard(jid)
        moves: list[tuple[float, JobId, int]] = []
        # a job moves down iff its service reaches its queue's threshold (thresholds increase:
        # bisect_right(thresholds, service) > q iff thresholds[q] <= service); none past the last
        limits = (*thresholds, math.inf)
        gpu_s_service = config.service == "gpu_s"
        get = entries.get
        for jid, job in running.items():
            entry = get(jid)
            if entry is not None:
                gpu_s = job.attained_gpu_s - entry.base_gpu_s  # _service, inlined
                service = gpu_s if gpu_s_service else gpu_s / max(job.gpus, 1)
                if service >= limits[entry.q]:
                    q = min(bisect_right(thresholds, service), last_q)
                    if q > entry.q:
                        moves.append((job.submit_time, jid, q))
        if config.starvation_guard:
            factor = config.starvation_factor
            for jid, job in pending.items():
                entry = entries.get(jid)
                gpu_s = job.attained_gpu_s - entry.base_gpu_s if entry is not None else 0.0
                if entry is None or gpu_s <= 0:
                    continue  # new, or not run since its last promotion (or ever): no pending time counts
                entry.pending_s += max(0.0, now - max(previous, job.waiting_since))
                if entry.q > 0 and entry.pending_s >= factor * gpu_s / max(job.gpus, 1):
                    entry.base_gpu_s = job.attained_gpu_s
                    entry.pending_s = 0.0
                    moves.append((job.submit_time, jid, 0))
        ordered = sorted(
            (jid not in running, (running.get(jid) or pending[jid]).submit_time, jid) for jid in new
        )
        for _, _, jid in ordered:
            job = running.get(jid) or pending[jid]
            q = min(bisect_right(thresholds, self._service(job, ListEntry(0))), last_q)
            entries[jid] = ListEntry(q)
            self.queues[q][jid] = None
            if jid in running:
                self.dirty.add(jid)
        for _, jid, q in sorted(moves):
            self._move(jid, entries[jid], q)
            self.dirty.add(jid)

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool) -> RoundDecisions:
        """One pass (steps 1–5): the lists' order is the ranking of
        :func:`~scheduling.core.preemptive.preemptive_exclusive`; then the lists whose order may
        have changed (a job started, stopped or moved into them) are partitioned, running jobs
        first (a list whose running jobs are its head already is left as it is). O(jobs), no
        sort; the ranking is built with C-level iteration (``zip``, ``map``, slices between the
        running jobs' positions): it is the whole per-round cost of a long queue."""
        pending_by_id = _by_id(snapshot.pending)
        running_rjs = snapshot.running
        running_ids = list(map(_job_id, map(_job, running_rjs)))
        running_by_id = dict(zip(running_ids, map(_job, running_rjs), strict=True))
        self.observe(snapshot, pending_by_id, running_by_id)
        # the key of a job is its position in the lists walked queue by queue; the pending jobs
        # are the order less the (few) running ones, cut out by slicing between their positions
        order = list(chain.from_iterable(self.queues))
        everyone = dict(zip(order, range(len(order)), strict=True))
        # the running jobs with their positions, ascending (positions are unique: never a tie)
        at_of = map(everyone.__getitem__, running_ids)
        ranked_running = sorted(zip(at_of, running_rjs, strict=True), key=_first)
        keys: list[int] = []
        ids: list[JobId] = []
        start = 0
        for at, _ in ranked_running:
            if at > start:  # running jobs mostly head their lists: most gaps are empty
                keys.extend(range(start, at))
                ids.extend(order[start:at])
            start = at + 1
        keys.extend(range(start, len(order)))
        ids.extend(order[start:])
        pending = list(map(pending_by_id.__getitem__, ids))
        decisions = preemptive_exclusive(
            snapshot,
            profile,
            self.policy,
            lambda job: everyone[job.id],
            explain=explain,
            ranked_pending=(keys, pending),
            ranked_running=ranked_running,
        )
        stopped = {p.job_id for p in decisions.preemptions}
        started = {s.job_id for s in decisions.starts}
        touched = {self.entries[jid].q for jid in stopped | started | self.dirty}
        self.dirty = set()
        if not touched:
            return decisions
        runs = (running_by_id.keys() - stopped) | started
        # the positions of each touched list's running jobs, and where each list begins in the
        # order: a list whose running jobs already make up its head is partitioned as it is
        ahead_at: dict[int, list[int]] = {i: [] for i in touched}
        entries = self.entries
        for jid in runs:
            heads = ahead_at.get(entries[jid].q)
            if heads is not None:
                heads.append(everyone[jid])
        begins = list(accumulate((len(queue) for queue in self.queues), initial=0))
        for i, heads in ahead_at.items():
            queue = self.queues[i]
            if 0 < len(heads) < len(queue):
                heads.sort()
                if heads[-1] != begins[i] + len(heads) - 1:  # distinct, within the list: not its head
                    ahead = [order[k] for k in heads]
                    ahead.extend(filterfalse(runs.__contains__, queue))
                    self.queues[i] = dict.fromkeys(ahead)
        return decisions

    def horizon(self, snapshot: Snapshot) -> float:
        """Next instant (s) at which time alone may move a job between lists, for the lists as
        :meth:`decide` left them at ``snapshot.now``: a running job reaching its queue's
        threshold, or (guard on) a pending one reaching its promotion; 1 µs early. Only valid
        for the snapshot of the last :meth:`decide`."""
        config = snapshot.config.tiresias
        if config != self.config:
            return snapshot.now
        now = snapshot.now
        change = math.inf
        thresholds = config.thresholds
        last_q = len(thresholds)
        gpu_s_service = config.service == "gpu_s"
        get = self.entries.get
        for rj in snapshot.running:
            job = rj.job
            entry = get(job.id)
            if entry is not None and entry.q < last_q:
                gpu_s = job.attained_gpu_s - entry.base_gpu_s  # _service, inlined
                if gpu_s_service:
                    t = now + (thresholds[entry.q] - gpu_s) / max(job.gpus, 1)
                else:
                    t = now + (thresholds[entry.q] - gpu_s / max(job.gpus, 1)) / 1.0
                if t < change:  # min(change, t)
                    change = t
        if config.starvation_guard:
            for job in snapshot.pending:
                entry = self.entries.get(job.id)
                if entry is None or entry.q == 0:
                    continue
                executed = (job.attained_gpu_s - entry.base_gpu_s) / max(job.gpus, 1)
                if executed > 0:
                    left = config.starvation_factor * executed - entry.pending_s
                    change = min(change, now + max(0.0, left))
        return change - 1e-6
