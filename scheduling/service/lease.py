"""The round lease: only one round (or partner update) at a time, across processes and machines.

A :class:`~scheduling.models.SchedulerLease` row claimed by a conditional UPDATE, plus, on
PostgreSQL, a session advisory lock. The advisory lock dies with its connection, so a round whose
worker was killed does not keep the lease until it expires: the next round takes the advisory
lock and then the row.
"""

from __future__ import annotations

import hashlib
import os
import socket
import time
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone

from scheduling.models import SchedulerLease

#: Name of the lease row every round claims.
ROUND_LEASE = "scheduling-round"
#: Seconds between two tries of :meth:`RoundLease.acquire_within` **(ours)**: short next to a
#: round (tens of ms at 1,000 GPUs), so a waiting caller starts soon after the holder ends.
LEASE_POLL_S = 0.01


def advisory_key(name: str) -> int:
    """A signed 64-bit key for ``pg_try_advisory_lock`` derived from the lease name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


def lease_holder(name: str = ROUND_LEASE) -> tuple[str, datetime] | None:
    """Who holds lease ``name`` and until when at the latest (its row's ``holder`` and
    ``expires_at``), or ``None`` when it is free. One query."""
    row = SchedulerLease.objects.filter(name=name).values_list("holder", "expires_at").first()
    return row if row is not None and row[0] else None


#: Leases this process holds now (see :meth:`RoundLease.acquire`).
_HELD_HERE: set[str] = set()


class RoundLease:
    """The lease that lets one round run at a time, across processes and machines.

    ``acquire()`` returns whether this holder got it. On PostgreSQL it first takes the session
    advisory lock ``pg_try_advisory_lock(key(name))`` (released when the connection closes, e.g.
    when a worker is killed); holding it proves that a holder recorded in the row by another
    process is dead, so the row is taken over. Everywhere, the row is claimed by one conditional
    UPDATE (``holder`` empty or expired; on PostgreSQL also any holder that is not a lease of this
    process) and counts only if exactly one row changed (the pattern of healthchecks'
    ``sendalerts``). Must be used in autocommit mode (not inside ``transaction.atomic``) so other
    processes see the claim; the advisory lock needs session-level connections (no PgBouncer
    transaction pooling).

    ``duration_s``: a lease not released (its holder died) is free again after this long (s);
    default the setting ``SHAREWISE_ROUND_LEASE_S``. On PostgreSQL the advisory lock frees it at once.
    """

    def __init__(self, name: str = ROUND_LEASE, duration_s: float | None = None) -> None:
        self.name = name
        self.duration_s = float(duration_s if duration_s is not None else settings.SHAREWISE_ROUND_LEASE_S)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._advisory = False

    @property
    def uses_advisory_lock(self) -> bool:
        """Whether the database offers advisory locks (PostgreSQL)."""
        return connection.vendor == "postgresql"

    def acquire(self) -> bool:
        """Claim the lease; ``True`` if this holder now has it, ``False`` if another round does."""
        if self.uses_advisory_lock:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [advisory_key(self.name)])
                if not cursor.fetchone()[0]:
                    return False
            self._advisory = True
        SchedulerLease.objects.get_or_create(name=self.name)
        now = timezone.now()
        free = Q(holder="") | Q(expires_at__lt=now)
        if self._advisory:
            # Under the advisory lock, a holder in the row is dead (a live one keeps the advisory
            # lock while it holds the row) unless it is a lease of this very process: PostgreSQL
            # advisory locks are re-entrant within one connection.
            free |= ~Q(holder__in=_HELD_HERE) if _HELD_HERE else Q(pk__isnull=False)
        claimed = SchedulerLease.objects.filter(free, name=self.name).update(
            holder=self.holder, expires_at=now + timedelta(seconds=self.duration_s)
        )
        if claimed != 1:
            self._unlock()
            return False
        _HELD_HERE.add(self.holder)
        return True

    def acquire_within(self, wait_s: float, poll_s: float = LEASE_POLL_S) -> bool:
        """:meth:`acquire`, tried again every ``poll_s`` seconds for up to ``wait_s`` seconds
        (0: once) while another holder has the lease; whether this holder got it."""
        deadline = time.monotonic() + wait_s
        while not self.acquire():
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll_s)
        return True

    def release(self) -> None:
        """Give the lease back (only if this holder still has it) and drop the advisory lock."""
        try:
            SchedulerLease.objects.filter(name=self.name, holder=self.holder).update(
                holder="", expires_at=timezone.now()
            )
        finally:
            _HELD_HERE.discard(self.holder)
            self._unlock()

    def _unlock(self) -> None:
        if self._advisory:
            self._advisory = False
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [advisory_key(self.name)])
