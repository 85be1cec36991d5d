"""Discrete-event simulator: replays a job trace on a cluster under one scheduling policy.

Events, in the order they are handled at the same instant: **completions** (GPUs released),
then **arrivals** (jobs join the queue), then the **round** (the policy decides). Rounds run at
every multiple of ``round_interval_s`` (0, 60, 120 … s by default) and, with
``round_on_events``, also at the instant of every arrival and completion.

Semantics (issue 3; MODEL.md §1–2; Luo et al., IWQoS 2024):

- A running job does ``1 / (t_j(b) · ξ_j)`` iterations per second, ``t_j(b)`` being
  ``profile.iter_time_s(job, sub_batch)`` and ``ξ_j`` the largest slowdown over its GPUs (1 on
  a GPU it holds alone; ``profile.slowdown(job, b, partner, b')[0]`` on one it shares): a gang
  runs at the pace of its slowest GPU. Rates are recomputed whenever the set of jobs on any of
  its GPUs changes. A job keeps its sub-batch for its whole placement.
- Preemption (preemptive policies only): the job returns to the queue with the iterations it
  has done; when it starts again it makes no progress for ``restart_cost_s`` (checkpoint
  restore and warm-up; default 30 s **(ours)**) while holding its GPUs.
- The snapshot of a round holds the pending jobs as they are (their ``Job`` objects are only
  rebuilt when a preemption changes them) and the running jobs with ``iterations_done`` and
  ``attained_gpu_s`` (GPUs × wall time held) brought up to the round's instant in a copy
  (:func:`with_progress`, equivalent to ``dataclasses.replace``). Preemptions are applied before starts.
- Every decision is checked: a start must name a pending job, exactly ``job.gpus`` distinct
  healthy GPUs, none holding ``max_jobs_per_gpu`` jobs already, and jobs whose memory fits
  together; a preemption must name a running job. A violation raises :class:`SimulationError`
  (a policy bug), never silently repaired.
- Accounting: a GPU held alone charges its job 1 GPU-s per second; a shared one is split by
  normalised progress, ``ξ_b / (ξ_a + ξ_b)`` to ``a`` (:func:`scheduling.core.fairness.charge_rates`,
  docs/FAIRNESS.md), so the GPU-time charged to jobs adds up to the busy GPU-time.
- Rounds that provably change nothing are skipped (``skip_idle_rounds``; results are identical
  with it off, which the tests check): a round with an empty queue; for non-preemptive policies,
  a round where fewer GPUs can take a job than the smallest pending gang asks for (free GPUs,
  plus GPUs holding one job for the sharing policies); and, after a round that decided nothing
  with no arrival or completion since, every round before the policy's *horizon*: the next
  instant at which the passing of time alone could change its decision (never, for policies
  whose "do nothing" stays "do nothing" while time passes). Each policy declares its rule as
  ``policy.skip_rule`` (:class:`scheduling.core.skip.SkipRule`; none: only an empty queue is
  skipped), and with quotas every skipped stretch ends when a pending job reaches the starvation
  bound (:func:`scheduling.core.skip.bound_crossing_horizon`).
- ``SimConfig.fidelity`` (:mod:`scheduling.sim.fidelity`, docs/FIDELITY.md): overheads, re-plans,
  rounds at the policy's horizon; ``round_interval_s = inf``: only event (and horizon) rounds.
- The engine has no randomness: the same trace, cluster, policy, profile and config always give
  the same result. ``seed`` is carried into the result for the report.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from scheduling.core.charge import charge_rates
from scheduling.core.metrics import JobOutcome
from scheduling.core.skip import NO_SKIP, SkipRule, bound_crossing_horizon
from scheduling.core.types import (
    Cluster,
    Job,
    JobId,
    Placement,
    Policy,
    Profile,
    RoundDecisions,
    RunningJob,
    Snapshot,
)
from scheduling.core.usage import UsageLedger
from scheduling.sim.belief import Belief
from scheduling.sim.collector import fewer_collections
from scheduling.sim.config import DEFAULT_RESTART_COST_S as DEFAULT_RESTART_COST_S
from scheduling.sim.config import DEFAULT_ROUND_INTERVAL_S as DEFAULT_ROUND_INTERVAL_S
from scheduling.sim.config import SimConfig
from scheduling.sim.job_state import JobState, views_at, with_progress
from scheduling.sim.progress import progress_bar
from scheduling.sim.relaunch import relaunch_all
from scheduling.sim.result import SimResult


class SimulationError(RuntimeError):
    """A policy returned a decision the cluster cannot carry out (a policy bug)."""


class Simulator:
    """One run of ``policy`` over ``jobs`` on ``cluster`` (see the module docstring).

    ``jobs`` need not be sorted; their ids must be unique (``ValueError`` otherwise). Call
    :meth:`run` once. ``progress``: show a tqdm bar (completed jobs) on stderr. ``belief``
    (:class:`~scheduling.sim.belief.Belief`, built over the same ``profile`` as its truth): the
    policy decides from the belief's profile and iteration times, observations feed it; without
    one the policy sees ``profile``, the truth.
    """

    def __init__(
        self,
        jobs: Sequence[Job],
        cluster: Cluster,
        policy: Policy,
        profile: Profile,
        config: SimConfig | None = None,
        *,
        progress: bool = False,
        belief: Belief | None = None,
    ) -> None:
        self.cluster = cluster
        self.belief = belief
        self.policy = policy
        self.profile = profile
        self.config = config or SimConfig()
        self.progress = progress
        jobs = self.config.fidelity.scaled(jobs)
        self._arrivals = sorted(jobs, key=lambda j: (j.submit_time, j.id))
        self._states = {j.id: JobState(j) for j in self._arrivals}
        if len(self._states) != len(self._arrivals):
            raise ValueError("job ids must be unique")
        rule: SkipRule = getattr(policy, "skip_rule", NO_SKIP)
        self._rule = rule if self.config.skip_idle_rounds else None
        n = cluster.size
        self._healthy = [g.healthy for g in cluster.gpus]
        self._gpu_jobs: list[list[JobId]] = [[] for _ in range(n)]
        self._n_free = sum(self._healthy)  # healthy GPUs holding no job
        self._n_single = 0  # healthy GPUs holding exactly one job
        self._n_busy = 0
        self._n_shared = 0
        self._pending: dict[JobId, Job] = {}  # id -> the job as policies see it, arrival order
        self._pending_gangs: dict[int, int] = {}
        self._running: dict[JobId, None] = {}
        self._heap: list[tuple[float, int, JobId, int]] = []
        self._seq = 0
        self._timeline: list[tuple[float, int, int]] = []
        self._outcomes: list[JobOutcome] = []
        self._slowdowns: dict[tuple[JobId, int, JobId, int], float] = {}
        self._rounds = 0
        self._horizon = -math.inf  # rounds before this decide nothing (valid while unchanged)
        # after a round that decided nothing: when a pending job next reaches the starvation bound
        # (with quotas the gate then waives the borrow bound), so an idle cluster's queue may change
        self._crossing = math.inf
        self._preemptions = 0
        self._since_due, self._change = False, math.inf  # since the last due round: an event; a horizon
        self._xi_weighted = self._xi_time = 0.0
        # running jobs as the last snapshot showed them at ``_views_at`` (s): the second snapshot
        # of a round (for the policy's horizon) reuses those still running on the same placement
        self._views: dict[JobId, RunningJob] = {}
        self._views_at = -math.inf
        # the instant at which a relaunch of every running job left a view of each in _views, in
        # the order of _running, that nothing has changed since (the next snapshot takes them all)
        self._views_all_at = -math.inf
        bin_s = self.config.usage_bin_s
        self._ledger = None if bin_s is None else UsageLedger(bin_s)

    # ------------------------------------------------------------------ queue
    def _enqueue(self, s: JobState, now: float) -> None:
        self._pending[s.base.id] = s.view if self.belief is None else self.belief.believe(s.view)
        g = s.base.gpus
        self._pending_gangs[g] = self._pending_gangs.get(g, 0) + 1
        s.queued_since = now

    def _dequeue(self, s: JobState, now: float) -> None:
        del self._pending[s.base.id]
        g = s.base.gpus
        left = self._pending_gangs[g] - 1
        if left:
            self._pending_gangs[g] = left
        else:
            del self._pending_gangs[g]
        s.queue_s += now - s.queued_since

    # --------------------------------------------------------------- progress
    def _advance(self, s: JobState, now: float) -> None:
        """Bring a running job's counters up to ``now`` at its current rate."""
        dt = now - s.last
        if dt <= 0:
            return
        s.attained += s.base.gpus * dt
        s.charged += s.charge_rate * dt
        if self._ledger is not None:
            self._ledger.charge(s.base.tenant, s.last, now, s.charge_rate)
        if s.xi != 1.0 or s.charge_rate != s.base.gpus:
            s.shared_s += dt
            self._xi_weighted += s.xi * dt
            self._xi_time += dt
        t0 = s.resume_at if s.resume_at > s.last else s.last
        if now > t0:
            s.done += s.rate * (now - t0)
        s.last = now

    def _progress_at(self, s: JobState, now: float) -> float:
        t0 = s.resume_at if s.resume_at > s.last else s.last
        return s.done + s.rate * (now - t0) if now > t0 else s.done

    def _slowdown(self, s: JobState, partner: JobState) -> float:
        pa, pb = s.placement, partner.placement
        assert pa is not None and pb is not None
        key = (s.base.id, pa.sub_batch, partner.base.id, pb.sub_batch)
        xi = self._slowdowns.get(key)
        if xi is None:
            xi_a, xi_b = self.profile.slowdown(s.base, pa.sub_batch, partner.base, pb.sub_batch)
            xi = float(xi_a)
            self._slowdowns[key] = xi
            self._slowdowns[(partner.base.id, pb.sub_batch, s.base.id, pa.sub_batch)] = float(xi_b)
        return xi

    def _pair_slowdown(self, a: JobId, b: JobId) -> float:
        """``ξ_a`` of running job ``a`` while it shares a GPU with running job ``b``."""
        return self._slowdown(self._states[a], self._states[b])

    def _reschedule(self, s: JobState, now: float) -> None:
        """Recompute a running job's rate from the jobs on its GPUs, and its completion event."""
        self._advance(s, now)
        assert s.placement is not None
        xi = 1.0
        jid = s.base.id
        worst: JobId | None = None  # the partner beside which it is slowest
        occupancy = [self._gpu_jobs[g] for g in s.placement.gpu_ids]
        for on_gpu in occupancy:
            for other in on_gpu:
                if other != jid:
                    x = self._slowdown(s, self._states[other])
                    if x > xi or worst is None:
                        xi, worst = max(xi, x), other
        s.xi = xi
        s.charge_rate = charge_rates(occupancy, self._pair_slowdown)[jid]
        s.rate = 1.0 / (s.iter_s * xi)
        self._repush(s, now)
        if self.belief is not None:
            self.belief.segment(s, now, None if worst is None else self._states[worst])

    def _mark(self, now: float) -> None:
        point = (now, self._n_busy, self._n_shared)
        if self._timeline and self._timeline[-1][0] == now:
            self._timeline[-1] = point
        elif not self._timeline or self._timeline[-1][1:] != point[1:]:
            self._timeline.append(point)

    # -------------------------------------------------------------- GPUs
    def _occupy(self, jid: JobId, gpu_ids: Sequence[int]) -> set[JobId]:
        partners: set[JobId] = set()
        for g in gpu_ids:
            on_gpu = self._gpu_jobs[g]
            if not on_gpu:
                self._n_free -= 1
                self._n_single += 1
                self._n_busy += 1
            else:
                self._n_single -= 1
                self._n_shared += 1
                partners.update(on_gpu)
            on_gpu.append(jid)
        return partners

    def _release(self, s: JobState, now: float) -> None:
        """Free a running job's GPUs and speed up the jobs it shared them with."""
        assert s.placement is not None
        jid = s.base.id
        partners: set[JobId] = set()
        for g in s.placement.gpu_ids:
            on_gpu = self._gpu_jobs[g]
            on_gpu.remove(jid)
            if on_gpu:
                self._n_shared -= 1
                self._n_single += 1
                partners.update(on_gpu)
            else:
                self._n_single -= 1
                self._n_free += 1
                self._n_busy -= 1
        del self._running[jid]
        s.placement = None
        s.rate = 0.0
        s.version += 1
        for other in sorted(partners):
            self._reschedule(self._states[other], now)
        self._mark(now)

    # ----------------------------------------------------------- decisions
    def _check_start(self, s: JobState, gpu_ids: tuple[int, ...], sub_batch: int) -> None:
        job = s.base
        where = f"{self.policy.name}: start of job {job.id}"
        if job.id not in self._pending:
            raise SimulationError(f"{where}: the job is not pending")
        if len(gpu_ids) != job.gpus or len(set(gpu_ids)) != len(gpu_ids):
            raise SimulationError(f"{where}: needs {job.gpus} distinct GPUs, got {gpu_ids}")
        if sub_batch < 1 or job.batch_size % sub_batch:
            raise SimulationError(f"{where}: sub-batch {sub_batch} does not divide batch {job.batch_size}")
        limit = self.config.scheduler.max_jobs_per_gpu
        for g in gpu_ids:
            if not (0 <= g < len(self._gpu_jobs)) or not self._healthy[g]:
                raise SimulationError(f"{where}: GPU {g} does not exist or is unhealthy")
            on_gpu = self._gpu_jobs[g]
            if len(on_gpu) >= limit:
                raise SimulationError(f"{where}: GPU {g} already holds {len(on_gpu)} job(s)")
            if on_gpu:
                used = self.profile.memory_mb(job, sub_batch)
                for other in on_gpu:
                    o = self._states[other]
                    assert o.placement is not None
                    used += self.profile.memory_mb(o.base, o.placement.sub_batch)
                if used > self.cluster.gpus[g].memory_mb:
                    raise SimulationError(
                        f"{where}: {used:.0f} MB on GPU {g} exceeds its {self.cluster.gpus[g].memory_mb} MB"
                    )

    def _apply(self, decisions: RoundDecisions, now: float) -> bool:
        for p in decisions.preemptions:
            s = self._states.get(p.job_id)
            if s is None or p.job_id not in self._running:
                raise SimulationError(
                    f"{self.policy.name}: preemption of job {p.job_id}, which is not running"
                )
            self._advance(s, now)
            self._release(s, now)
            s.preemptions += 1
            self._preemptions += 1
            s.view = with_progress(s.base, s.done, s.attained, now)  # dataclasses.replace, faster
            self._enqueue(s, now)
        for st in decisions.starts:
            s = self._states.get(st.job_id)
            if s is None:
                raise SimulationError(f"{self.policy.name}: start of unknown job {st.job_id}")
            gpu_ids = tuple(st.gpu_ids)
            self._check_start(s, gpu_ids, st.sub_batch)
            if self.belief is not None and st.shares:  # judged with the truth, before it runs
                truth = [self._true_job(self._states[sh.partner_id], now) for sh in st.shares]
                self.belief.decided(now, with_progress(s.base, s.done, 0.0, None), st, truth)
            self._dequeue(s, now)
            s.placement = Placement(s.base.id, gpu_ids, st.sub_batch, now)
            s.iter_s = self.profile.iter_time_s(s.base, st.sub_batch)
            s.last = now
            self.config.fidelity.started(s, now, self.config.restart_cost_s)
            if math.isnan(s.first_start):
                s.first_start = now
            self._running[s.base.id] = None
            partners = self._occupy(s.base.id, gpu_ids)
            self._reschedule(s, now)
            for other in sorted(partners):
                self._reschedule(self._states[other], now)
        if decisions.starts or decisions.preemptions:
            self._mark(now)
            return True
        return False

    def _true_job(self, s: JobState, now: float) -> tuple[Job, int]:
        """A running job as it truly is at ``now`` (trace iteration time, progress), its sub-batch."""
        assert s.placement is not None
        return with_progress(s.base, self._progress_at(s, now), 0.0, None), s.placement.sub_batch

    def _snapshot(self, now: float) -> Snapshot:
        belief = self.belief
        if belief is not None:  # pending jobs whose believed iteration time changed
            for jid in belief.changed_jobs():
                if jid in self._pending:
                    self._pending[jid] = belief.believe(self._states[jid].view)
        # a running job's view at ``now`` depends only on its state, which a round's decisions
        # and relaunches at ``now`` leave as it was (progress and service at ``now`` are kept);
        # the belief may change with decisions, so its views are always rebuilt
        if now == self._views_all_at and belief is None:  # every view made by the relaunch
            self._views_all_at = -math.inf  # taken once: a round's decisions follow
            running = tuple(self._views.values())
        else:
            views = self._views if now == self._views_at and belief is None else {}
            believe = None if belief is None else belief.believe
            running, self._views = views_at(now, self._running, self._states, views, believe)
            self._views_at = now
        pending = tuple(self._pending.values())
        return Snapshot(now, self.cluster, pending, running, self.config.scheduler, self.config.tenant_quotas)

    def _useful_from(self, changed: bool) -> float:
        """Earliest instant (s) at which a round may decide something, given the state now:
        ``-inf`` (now), a time (the horizon), or ``inf`` (not before the next arrival or
        completion); see the policy's :class:`~scheduling.core.skip.SkipRule`."""
        rule = self._rule
        if rule is None:
            return -math.inf
        if not self._pending:
            return math.inf
        if rule.capacity:
            usable = self._n_free + (self._n_single if rule.shares else 0)
            if usable < min(self._pending_gangs):
                return math.inf
        if not changed and rule.horizon is not None:
            return self._horizon
        return -math.inf

    def _set_horizon(self, snapshot: Snapshot) -> None:
        """After a round that decided nothing: when may time alone change the policy's mind?"""
        self._crossing = bound_crossing_horizon(snapshot)
        rule = self._rule
        if rule is None or rule.horizon is None:
            return
        self._horizon = min(rule.horizon(snapshot), self._crossing)

    def _relaunch(self, now: float, started: set[JobId], before: bool) -> None:
        """At a re-plan, relaunch every running job not started in it (:mod:`~scheduling.sim.fidelity`)."""
        fid = self.config.fidelity
        if fid.replans(before, self._since_due or self._change <= now):
            if not started and self.belief is None and self._ledger is None:
                # every running job relaunched: one loop, and the heap rebuilt from their new
                # events alone (every other event in it is stale), so stale ones are never popped
                states = self._states
                views: dict[JobId, RunningJob] = {}
                events, self._seq, totals = relaunch_all(
                    [states[jid] for jid in self._running],
                    now,
                    fid.relaunch,
                    fid.charge == "interrupted",
                    self._seq,
                    (self._xi_weighted, self._xi_time),
                    views,
                )
                self._xi_weighted, self._xi_time = totals
                self._views, self._views_at, self._views_all_at = views, now, now
                self._heap[:] = events
                heapq.heapify(self._heap)
                return
            for jid in self._running:
                if jid not in started:
                    s = self._states[jid]
                    self._advance(s, now)
                    fid.relaunch_job(s, now)
                    if self.belief is None:
                        self._repush(s, now)
                    else:  # the belief records a segment at every reschedule
                        self._reschedule(s, now)

    def _repush(self, s: JobState, now: float) -> None:
        """A relaunched job's completion event at its rate, which a relaunch leaves as it was (the
        same jobs on its GPUs): :meth:`_reschedule` without recomputing ``ξ`` and the charge."""
        s.version += 1
        remaining = s.base.iterations - s.done
        t_start = s.resume_at if s.resume_at > now else now
        end = t_start + (remaining / s.rate if remaining > 0 else 0.0)
        self._seq += 1
        heapq.heappush(self._heap, (end, self._seq, s.base.id, s.version))

    def _next_horizon_round(self, now: float, unchanged: Snapshot | None = None) -> float:
        """After a due round: the policy's horizon (after its decisions), for horizon rounds and
        re-plans on a queue change; returns the next horizon round (``inf``: none).
        ``unchanged``: the round's snapshot when the round decided nothing (and no belief
        rebuilds views): the snapshot at ``now`` would be equal to it, the same views of the
        running jobs and the same pending jobs, so it is reused."""
        fid, self._since_due = self.config.fidelity, False
        horizon = getattr(self.policy, "skip_rule", NO_SKIP).horizon
        if horizon is not None and (fid.rounds_at_horizon or fid.replan == "on-change"):
            reuse = unchanged is not None and unchanged.now == now and self.belief is None
            self._change = horizon(unchanged if reuse and unchanged is not None else self._snapshot(now))
        return self._change + 2e-6 if fid.rounds_at_horizon and self._change + 2e-6 > now else math.inf

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        """Replay the whole trace; returns a :class:`SimResult`.

        Raises :class:`SimulationError` when the policy returns an impossible decision. The
        collector's young threshold is raised meanwhile and restored after
        (:func:`scheduling.sim.collector.fewer_collections`: a tenth of an SJF-BSBF run was in it).
        """
        with fewer_collections():
            return self._run()

    def _run(self) -> SimResult:
        interval = self.config.round_interval_s
        on_events = self.config.round_on_events
        fid = self.config.fidelity
        periodic_on = math.isfinite(interval)
        visit_all = fid.replan != "never"  # a re-plan may relaunch jobs at any due round
        fid_on = visit_all or fid.rounds_at_horizon
        t_horizon = inf = math.inf
        arrivals = self._arrivals
        heap = self._heap
        states = self._states
        n_arrivals = len(arrivals)
        ai = 0
        next_k = 0  # first periodic round (at next_k × interval) not yet passed
        changed = True  # an arrival, completion or decision since the last round that did nothing
        bar = progress_bar(n_arrivals, self.policy.name, shown=self.progress, unit="job")
        finished_since_bar = 0
        while True:
            while heap and states[heap[0][2]].version != heap[0][3]:
                heapq.heappop(heap)
            t_done = heap[0][0] if heap else inf
            t_arrive = arrivals[ai].submit_time if ai < n_arrivals else inf
            idle = not self._running and ai == n_arrivals
            if idle and (not self._pending or (not changed and self._crossing == inf)):
                break  # nothing left, or a queue no round can ever change
            useful_from = self._useful_from(changed)
            if not periodic_on or (useful_from == inf and not visit_all):
                t_round = inf
            elif useful_from > next_k * interval and not visit_all:
                t_round = _first_round_at_or_after(useful_from, interval) * interval
            else:
                t_round = next_k * interval
            now = min(
                t_done, t_arrive, t_round, t_horizon, inf if self.belief is None else self.belief.next_due
            )
            if now == inf:
                break
            event = False
            while heap and heap[0][0] == now:
                _, _, jid, version = heapq.heappop(heap)
                s = states[jid]
                if s.version != version:
                    continue
                self._advance(s, now)
                s.done = float(s.base.iterations)
                self._release(s, now)
                self._outcomes.append(
                    JobOutcome(
                        jid,
                        s.base.tenant,
                        s.base.gpus,
                        s.base.submit_time,
                        s.first_start,
                        now,
                        s.queue_s,
                        s.charged,
                        s.shared_s,
                        s.preemptions,
                    )
                )
                finished_since_bar += 1
                event = True
            while ai < n_arrivals and arrivals[ai].submit_time == now:
                self._enqueue(states[arrivals[ai].id], now)
                ai += 1
                event = True
            if self.belief is not None and self.belief.next_due <= now and self.belief.observe(now):
                changed = True  # something learned: a round that decided nothing may now decide
            if event:
                changed = self._since_due = True
            k_now = _first_round_at_or_after(now, interval) if periodic_on else -1
            periodic = k_now >= next_k and k_now * interval == now
            next_k = max(next_k, k_now + 1 if periodic else k_now)  # boundaries up to now are passed
            due = periodic or (event and on_events) or now == t_horizon
            started: set[JobId] = set()
            unchanged: Snapshot | None = None  # the round's snapshot, when it decided nothing
            if due and fid_on:
                self._relaunch(now, started, before=True)
            if due and self._useful_from(changed) <= now:
                self._rounds += 1
                snapshot = self._snapshot(now)
                profile = self.profile if self.belief is None else self.belief.profile()
                decisions = self.policy.decide(snapshot, profile, explain=False)
                changed = self._apply(decisions, now)
                started = {st.job_id for st in decisions.starts}
                if not changed:
                    self._set_horizon(snapshot)
                    unchanged = snapshot
            if due and fid_on:
                self._relaunch(now, started, before=False)
                t_horizon = self._next_horizon_round(now, unchanged)
            if finished_since_bar:
                bar.update(finished_since_bar)
                finished_since_bar = 0
        bar.update(finished_since_bar)
        bar.close()
        unfinished = tuple(sorted(set(self._pending) | set(self._running)))
        return SimResult(
            policy=self.policy.name,
            outcomes=tuple(self._outcomes),
            unfinished=unfinished,
            timeline=tuple(self._timeline),
            capacity_gpus=sum(self._healthy),
            rounds=self._rounds,
            preemptions=self._preemptions,
            mean_shared_slowdown=self._xi_weighted / self._xi_time if self._xi_time else math.nan,
            seed=self.config.seed,
            learning=None if self.belief is None else self.belief.summary(),
            usage=self._ledger,
        )


def _first_round_at_or_after(t: float, interval: float) -> int:
    """Index ``k`` of the first periodic round ``k × interval ≥ t``."""
    k = int(t // interval)
    return k + 1 if k * interval < t else k


def simulate(
    jobs: Sequence[Job],
    cluster: Cluster,
    policy: Policy,
    profile: Profile,
    config: SimConfig | None = None,
    *,
    progress: bool = False,
    belief: Belief | None = None,
) -> SimResult:
    """Convenience wrapper: ``Simulator(...).run()`` (see :class:`Simulator`)."""
    return Simulator(jobs, cluster, policy, profile, config, progress=progress, belief=belief).run()
