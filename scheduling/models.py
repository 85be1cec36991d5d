"""Scheduling rounds, the lease that keeps two rounds from interleaving, and what the scheduler
learned from the agents' measurements.

A :class:`Round` records one run of the policy over a snapshot of the database: when it ran,
which policy, how long it took, and every decision with its explanation (the dashboard reads
``decisions``). A :class:`SchedulerLease` is one row per lease name; a round claims it with a
conditional UPDATE (``scheduling.service.RoundLease``), the same on SQLite and PostgreSQL.

The learned profile's memory (docs/LEARNING.md, "In the service"; ``scheduling.core.learning``):
summaries of samples, not the samples — :class:`LearnedSlowdown` per ordered pair of
``(model, sub-batch)`` sides, :class:`LearnedIterTime` per class ``(model, global batch, GPUs)``,
:class:`JobIterTime` per job, each with the fields of ``SampleStats``; :class:`IncompatiblePair`
for pairs that ran out of memory together; and a bounded log of measured vs predicted slowdowns,
:class:`SlowdownObservation`, for the dashboard's prediction error over time.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q
from django.utils import timezone

from scheduling.core.learning import SampleStats
from scheduling.round_waits import decision_list, wait_decisions


class Round(models.Model):
    """One scheduling round and its decisions.

    ``decisions`` is a list with one dict per job the round started or preempted (rows written
    before migration 0006: per job it looked at, waits included)::

        {"job_id": int, "action": "start" | "wait" | "preempt",
         "gpu_ids": [GPU pk, ...], "gpus": ["node-00:3", ...],     # start only, else []
         "sub_batch": int | None, "accum_steps": int | None,       # start only
         "shares": [{"partner_id": int, "gpu_ids": [GPU pk, ...], "xi_self": float,
                     "xi_partner": float, "t_seq_s": float, "t_con_s": float}],
         "reason": str}

    (``xi_*``: co-location slowdowns ξ; ``t_seq_s``/``t_con_s``: predicted mean completion times
    of the pair run sequentially vs. shared, s; MODEL.md §2, Luo et al. IWQoS 2024.)
    ``waits``: the ``wait`` decisions, compactly (job ids in order, each distinct reason once;
    :mod:`scheduling.round_waits`); :meth:`wait_decisions` and :meth:`decision_list` read old
    and new rows alike.
    ``duration_ms``: snapshot + policy + persist (ms); ``phases_ms``: the same split by phase
    (``snapshot``, ``policy``, ``persist``); dispatch happens after commit and is not included.
    ``digest``: SHA-256 of ``policy``, ``decisions`` and ``waits``, so a round that would repeat the last
    recorded one without changing anything is not stored again.
    """

    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    policy = models.CharField(max_length=32)
    duration_ms = models.FloatField(default=0.0)
    phases_ms = models.JSONField(default=dict, blank=True)
    n_started = models.PositiveIntegerField(default=0)
    n_waiting = models.PositiveIntegerField(default=0)
    n_preempted = models.PositiveIntegerField(default=0)
    decisions = models.JSONField(default=list, blank=True)
    waits = models.JSONField(default=dict, blank=True)
    digest = models.CharField(max_length=64, blank=True, default="", editable=False)
    #: ``{str(job id): POSIX s}``: when the round estimates its first waiting jobs will start
    #: (``scheduling.core.eta``; empty for a preemptive policy). Not part of ``digest``: a repeated
    #: round refreshes them on the latest stored round instead (``scheduling.service.waiting``).
    estimated_starts = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(duration_ms__gte=0), name="round_duration_non_negative"),
        ]

    def wait_decisions(self) -> list[tuple[int, str]]:
        """``(job id, reason)`` of every job the round left waiting, in the order decided."""
        return wait_decisions(self.decisions, self.waits)

    def decision_list(self) -> list[dict[str, Any]]:
        """Every decision as a dict of the shape above: starts and preemptions, then waits."""
        return decision_list(self.decisions, self.waits)

    def __str__(self) -> str:
        return (
            f"round {self.pk} ({self.policy}) at {self.started_at:%Y-%m-%d %H:%M:%S}: "
            f"{self.n_started} started, {self.n_waiting} waiting, {self.n_preempted} preempted"
        )


class SchedulerLease(models.Model):
    """A named lease: at most one holder at a time, until ``expires_at``.

    ``holder`` empty means free. Claimed and released only by conditional UPDATEs
    (``scheduling.service.RoundLease``), so whichever of two claimants changes the row first wins.
    """

    name = models.CharField(max_length=64, unique=True)
    holder = models.CharField(max_length=128, blank=True, default="")
    expires_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"lease {self.name}: {self.holder or 'free'} until {self.expires_at:%H:%M:%S}"


class Stats(models.Model):
    """The fields of :class:`~scheduling.core.learning.SampleStats`: ``count`` samples, their
    effective number ``weight``, the exponentially weighted mean and variance of ``ln(sample)``;
    ``updated_at`` when the last sample came."""

    count = models.PositiveIntegerField(default=0)
    weight = models.FloatField(default=0.0)
    mean_log = models.FloatField(default=0.0)
    var_log = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        abstract = True

    @property
    def stats(self) -> SampleStats:
        """The summary as the core's immutable :class:`SampleStats`."""
        return SampleStats(self.count, self.weight, self.mean_log, self.var_log)

    def set_stats(self, stats: SampleStats) -> None:
        """Copy ``stats`` into the fields (not saved)."""
        self.count, self.weight, self.mean_log, self.var_log = (
            stats.count,
            stats.weight,
            stats.mean_log,
            stats.var_log,
        )


class LearnedSlowdown(Stats):
    """Samples of the slowdown ξ of a ``(model_a, sub_a)`` job beside a ``(model_b, sub_b)`` one
    (ordered: the ξ of side a; models as ``scheduling.core.learning.normalise_model`` writes them;
    sub-batches in samples)."""

    model_a = models.CharField(max_length=64)
    sub_a = models.PositiveIntegerField()
    model_b = models.CharField(max_length=64)
    sub_b = models.PositiveIntegerField()

    class Meta:
        ordering = ["model_a", "sub_a", "model_b", "sub_b"]
        constraints = [
            models.UniqueConstraint(
                fields=["model_a", "sub_a", "model_b", "sub_b"], name="slowdown_one_per_pair"
            )
        ]

    def __str__(self) -> str:
        return f"ξ of {self.model_a}@{self.sub_a} beside {self.model_b}@{self.sub_b}: {self.count} samples"


class LearnedIterTime(Stats):
    """Samples of the exclusive iteration time at the full batch (s) of the jobs of one class:
    ``(model, global batch, GPUs)`` (``count`` 0: only its memory was measured)."""

    model = models.CharField(max_length=64)
    batch_size = models.PositiveIntegerField()
    gpus = models.PositiveIntegerField()
    #: The largest peak memory per GPU a job of the class reported, at the full batch (MB):
    #: conservative for the class's jobs that have not run yet.
    memory_mb = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["model", "batch_size", "gpus"]
        constraints = [
            models.UniqueConstraint(fields=["model", "batch_size", "gpus"], name="iter_time_one_per_class")
        ]

    def __str__(self) -> str:
        return f"{self.model} batch {self.batch_size} on {self.gpus} GPUs: {self.count} samples"


class JobIterTime(Stats):
    """Samples of one job's exclusive iteration time at its full batch (s), measured while it ran
    alone on its GPUs."""

    job = models.OneToOneField(
        "cluster.Job", on_delete=models.CASCADE, primary_key=True, related_name="iter_stats"
    )

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.count} exclusive samples"


class IncompatiblePair(models.Model):
    """Two ``(model, sub-batch)`` sides that ran out of GPU memory together: never placed together
    again at those sub-batches (unordered: stored as ``scheduling.core.learning.pair_id`` orders
    it). ``job``/``partner``: the jobs of the first out-of-memory (ids, kept after deletion)."""

    model_a = models.CharField(max_length=64)
    sub_a = models.PositiveIntegerField()
    model_b = models.CharField(max_length=64)
    sub_b = models.PositiveIntegerField()
    job = models.BigIntegerField()
    partner = models.BigIntegerField()
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["model_a", "sub_a", "model_b", "sub_b"], name="incompatible_one_per_pair"
            )
        ]

    def __str__(self) -> str:
        return f"{self.model_a}@{self.sub_a} and {self.model_b}@{self.sub_b} ran out of memory"


class SlowdownObservation(models.Model):
    """One co-location segment of a job as measured: the ξ the scheduler predicted when it sent
    the placement (``generation``) and the ξ measured since (the latest sample), beside
    ``partner``. A bounded log (setting ``SHAREWISE_OBSERVATIONS_KEPT``) for the dashboard."""

    job = models.BigIntegerField()
    partner = models.BigIntegerField()
    generation = models.PositiveIntegerField()
    model_a = models.CharField(max_length=64)
    sub_a = models.PositiveIntegerField()
    model_b = models.CharField(max_length=64)
    sub_b = models.PositiveIntegerField()
    predicted = models.FloatField()
    measured = models.FloatField()
    samples = models.PositiveIntegerField(default=1)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "generation"], name="observation_one_per_segment")
        ]

    def __str__(self) -> str:
        xi = f"ξ {self.predicted:.2f} predicted, {self.measured:.2f} measured"
        return f"job {self.job} beside job {self.partner}: {xi}"


class TraceClock(models.Model):
    """The time scale of a trace replayed faster than real time (``manage.py demo``): trace time
    ``T = trace_origin_s + (wall − wall_origin) × speedup`` (s), the demo's own clock
    (``demo.live.Clock``). While a row exists the dashboard shows trace time (axes, durations,
    windows) so that its figures are the terminal's; no row: wall-clock time. The demo writes the
    one row when it starts (and replaces any earlier one)."""

    speedup = models.FloatField()  # trace seconds per wall second
    trace_origin_s = models.FloatField()  # trace time (s) at wall_origin
    wall_origin = models.DateTimeField()
    trace = models.CharField(max_length=200, blank=True, default="")  # the trace's name

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(speedup__gt=0), name="trace_clock_speedup_positive")
        ]

    def __str__(self) -> str:
        return f"trace clock {self.trace or '?'}: {self.speedup:g}x from {self.wall_origin:%H:%M:%S}"


class OrderStream(models.Model):
    """One node's stream of orders for the pull transport (docs/AGENT.md §1a): ``last_seq`` is
    the sequence number of the newest order recorded for it (0: none yet). Bumped by an UPDATE in
    the transaction that records the orders, which holds the row's lock until commit, so one
    node's orders become visible in the order of their numbers — a cursor never skips one."""

    node = models.OneToOneField(
        "cluster.Node", primary_key=True, on_delete=models.CASCADE, related_name="order_stream"
    )
    last_seq = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"orders of node {self.node_id}: up to {self.last_seq}"


class AgentOrder(models.Model):
    """One order waiting for a node's agent to pull it: ``message`` is the very
    ``sharewise.apply_placement`` payload a broker would carry (``agent.messages``), ``seq`` its
    number in the node's :class:`OrderStream`. Deleted once the agent acknowledges it (a poll
    with a cursor at or past ``seq``)."""

    #: No index of its own: ``agentorder_unique_seq_per_node`` leads with the node.
    node = models.ForeignKey(
        "cluster.Node", on_delete=models.CASCADE, related_name="agent_orders", db_index=False
    )
    seq = models.BigIntegerField()
    message = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["node", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["node", "seq"], name="agentorder_unique_seq_per_node"),
            models.CheckConstraint(condition=Q(seq__gte=1), name="agentorder_seq_positive"),
        ]

    def __str__(self) -> str:
        return f"order {self.seq} of node {self.node_id}"
