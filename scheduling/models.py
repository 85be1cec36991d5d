"""Scheduling rounds and the lease that keeps two rounds from interleaving.

A :class:`Round` records one run of the policy over a snapshot of the database: when it ran,
which policy, how long it took, and every decision with its explanation (the dashboard reads
``decisions``). A :class:`SchedulerLease` is one row per lease name; a round claims it with a
conditional UPDATE (``scheduling.service.RoundLease``), the same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class Round(models.Model):
    """One scheduling round and its decisions.

    ``decisions`` is a list with one dict per job the policy looked at::

        {"job_id": int, "action": "start" | "wait" | "preempt",
         "gpu_ids": [GPU pk, ...], "gpus": ["node-00:3", ...],     # start only, else []
         "sub_batch": int | None, "accum_steps": int | None,       # start only
         "shares": [{"partner_id": int, "gpu_ids": [GPU pk, ...], "xi_self": float,
                     "xi_partner": float, "t_seq_s": float, "t_con_s": float}],
         "reason": str}

    (``xi_*``: co-location slowdowns ξ; ``t_seq_s``/``t_con_s``: predicted mean completion times
    of the pair run sequentially vs. shared, s; MODEL.md §2, Luo et al. IWQoS 2024.)
    ``duration_ms``: snapshot + policy + persist (ms); ``phases_ms``: the same split by phase
    (``snapshot``, ``policy``, ``persist``); dispatch happens after commit and is not included.
    ``digest``: SHA-256 of ``policy`` and ``decisions``, so a round that would repeat the last
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
