"""A tenant's pending jobs, as the per-tenant cap on pending jobs needs them: exact only near the cap.

Each submission checks ``SHAREWISE_MAX_PENDING_PER_TENANT``, and the count it asks for is an
index scan over every pending job of the tenant: the PostgreSQL cost of a submission grew with the
backlog (issue 16). The cap only needs the count when it is close, so a count read less than
:data:`LIFETIME_S` ago by this process answers while it, plus the jobs being added, stays
:data:`HEADROOM` jobs or more below the cap; closer than that, every submission counts exactly,
as before. Since a count that old is short of the truth by at most the submissions made since
(under ``HEADROOM / LIFETIME_S`` = 2,000 a second per tenant, above the throttle's default 10), the
cap is never passed for want of a fresh count.
"""

from __future__ import annotations

import time

from cluster.models import Job

#: Seconds a count stays good for a decision far from the cap.
LIFETIME_S = 1.0
#: Jobs below the cap under which an old count is enough (see the module docstring).
HEADROOM = 2_000

#: tenant id -> (time.monotonic() of the count, pending jobs then).
_counts: dict[int, tuple[float, int]] = {}


def pending_jobs(tenant_id: int, limit: int, adding: int = 1) -> int:
    """The pending jobs of tenant ``tenant_id`` for a check of ``adding`` more against ``limit``:
    exact (one query) unless a count at most :data:`LIFETIME_S` old, plus ``adding``, is at
    least :data:`HEADROOM` below ``limit``; then that count (no query)."""
    now = time.monotonic()
    seen = _counts.get(tenant_id)
    if seen is not None and now - seen[0] <= LIFETIME_S and seen[1] + adding <= limit - HEADROOM:
        return seen[1]
    count = Job.objects.filter(tenant_id=tenant_id, status=Job.Status.PENDING).count()
    _counts[tenant_id] = (now, count)
    return count
