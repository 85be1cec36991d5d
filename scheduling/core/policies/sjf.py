"""Shortest job first (non-preemptive) and shortest remaining time first (preemptive SJF).

Baselines of MODEL.md §4; the key is ``P_j = R_j · t_j(B_j)``, the remaining exclusive time (s).
"""

from __future__ import annotations

from scheduling.core.preemptive import preemptive_exclusive
from scheduling.core.ranking import PendingRanking
from scheduling.core.rounds import exclusive_in_order, sjf_key
from scheduling.core.skip import SkipRule, never
from scheduling.core.types import Profile, RoundDecisions, Snapshot


class SjfPolicy:
    """Non-preemptive SJF: pending jobs by ``(P_j, submit_time, id)``, exclusive GPUs, with
    backfill — a job that does not fit the idle GPUs is skipped and smaller ones may start.
    Running jobs are never preempted.

    The pending jobs stay sorted between rounds (:class:`~scheduling.core.ranking.PendingRanking`,
    a cache: ``incremental=False`` sorts them from scratch every round, with the same decisions).
    """

    name = "sjf"
    preemptive = False
    # never preempts; pending jobs' P_j, gang sizes and memory do not change while time alone passes
    skip_rule = SkipRule(capacity=True, shares=False, horizon=never)

    def __init__(self, *, incremental: bool = True) -> None:
        self.incremental = incremental
        self._ranking = PendingRanking(lambda job, now: sjf_key(job))

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates nothing but its cache."""
        order = self._ranking.order(snapshot, self.incremental, sjf_key)
        starts, waits = exclusive_in_order(snapshot, profile, order, blocking=False, explain=explain)
        self._ranking.started({s.job_id for s in starts})
        return RoundDecisions(self.name, snapshot.now, starts, (), waits)


class SrtfPolicy:
    """Preemptive SJF (shortest remaining time first), exclusive GPUs.

    Every round, the jobs to run are chosen among pending **and** running jobs by shortest
    remaining time ``P_j`` (ties: submit time, id), greedily while their gangs fit the healthy
    GPUs; running jobs not chosen are preempted and go back to the queue
    (:func:`scheduling.core.preemptive.preemptive_exclusive`).

    A pending job's ``P_j`` does not change while it waits, so the pending jobs stay sorted
    between rounds (:class:`~scheduling.core.ranking.PendingRanking`, a cache:
    ``incremental=False`` sorts them from scratch every round, with the same decisions).
    """

    name = "srtf"
    preemptive = True
    # preempts, so no capacity rule; pending jobs' remaining times are fixed and running jobs' only
    # shrink, so no pending job can overtake a running one while time alone passes
    skip_rule = SkipRule(capacity=False, shares=False, horizon=never)

    def __init__(self, *, incremental: bool = True) -> None:
        self.incremental = incremental
        self._ranking = PendingRanking(lambda job, now: sjf_key(job))

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates nothing but its cache."""
        ranked = self._ranking.update(snapshot.pending, snapshot.now) if self.incremental else None
        decisions = preemptive_exclusive(
            snapshot, profile, self.name, sjf_key, explain=explain, ranked_pending=ranked
        )
        self._ranking.started({s.job_id for s in decisions.starts})
        return decisions
