"""FIFO: first come, first served, exclusive GPUs, no preemption (MODEL.md §4 baseline)."""

from __future__ import annotations

from scheduling.core.ranking import PendingRanking
from scheduling.core.rounds import arrival_key, exclusive_in_order
from scheduling.core.skip import SkipRule, never
from scheduling.core.types import Profile, RoundDecisions, Snapshot


class FifoPolicy:
    """Start pending jobs in arrival order ``(submit_time, id)`` on idle GPUs, one job per GPU.

    Choice: **strict FIFO with head-of-line blocking** — when the job at the head of the queue
    does not fit the idle GPUs, every later job waits too, even one that would fit (no backfill;
    backfilling is what SJF does). A job whose gang exceeds the healthy GPUs of the cluster can
    never start; it waits with that reason and does not block the queue (otherwise one bad job
    would stall the cluster forever). Gangs go to one node when possible, else the fewest nodes
    (:class:`scheduling.core.round_state.RoundState`). Never preempts.

    The pending jobs stay in arrival order between rounds
    (:class:`~scheduling.core.ranking.PendingRanking`, a cache: ``incremental=False`` sorts them
    from scratch every round, with the same decisions).
    """

    name = "fifo"
    preemptive = False
    # never preempts; looks only at queue order, gang sizes and memory, none of which changes
    # while time alone passes
    skip_rule = SkipRule(capacity=True, shares=False, horizon=never)

    def __init__(self, *, incremental: bool = True) -> None:
        self.incremental = incremental
        self._ranking = PendingRanking(lambda job, now: arrival_key(job))

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round (see the class docstring); deterministic, mutates nothing but
        its cache."""
        order = self._ranking.order(snapshot, self.incremental, arrival_key)
        starts, waits = exclusive_in_order(snapshot, profile, order, blocking=True, explain=explain)
        self._ranking.started({s.job_id for s in starts})
        return RoundDecisions(self.name, snapshot.now, starts, (), waits)
