"""When a node counts as silent: the heartbeat timeout judged against what the service could read.

A node's silence is measured from its last heartbeat to the **newest heartbeat the service has
read from any node**, not to the wall clock. When the service itself falls behind (its web
threads queued, the database locked by a round, one core shared by everything), every node's
heartbeats wait unread alike, the newest one read grows old with them, and no node is blamed
for the service's delay. When one agent really dies, the others' heartbeats keep being read, so
its silence is counted in full and it is detected within the timeout as before.

What this cannot tell apart: every node falling silent at once — the whole fleet died, or the
service read nothing at all. Then silence is counted against the wall clock with a second timeout
of grace (detection within ``2 × SHAREWISE_HEARTBEAT_TIMEOUT_S``), the same caution as
Kubernetes' node lifecycle controller, which stops evicting when every node of a zone is
unreachable at once (``--unhealthy-zone-threshold``). A node never heard from is judged from its
registration (``created_at``); while no node at all has sent a heartbeat there is nothing to
compare with, and the wall clock is used with one timeout (an agent that never starts).

Units: seconds (s).
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db.models import Max

from cluster.models import Node

#: How many timeouts of wall-clock silence make a node silent even though no node's heartbeat
#: was read meanwhile (the whole fleet silent at once; module docstring) **(ours)**.
WHOLE_FLEET_TIMEOUTS = 2


def heartbeat_timeout_s() -> float:
    """Seconds of silence after which a node is unreachable: its GPUs take no new job (setting
    ``SHAREWISE_HEARTBEAT_TIMEOUT_S``; AGENT.md §3 suggests three heartbeat intervals)."""
    return float(settings.SHAREWISE_HEARTBEAT_TIMEOUT_S)


def newest_heartbeat() -> datetime | None:
    """The newest heartbeat the service has read from any node (``None``: none yet); one query."""
    newest: datetime | None = Node.objects.aggregate(t=Max("last_heartbeat"))["t"]
    return newest


def silent_for_s(
    last_heartbeat: datetime | None, registered_at: datetime, newest: datetime | None, now: datetime
) -> float:
    """How long (s) a node counts as silent, to compare with the timeout.

    ``last_heartbeat``: its last one read (``None``: never heard from, then ``registered_at``);
    ``newest``: :func:`newest_heartbeat`; ``now``: the check's time. The silence is
    ``newest − heard`` (what the service read from the others since), or, when that is shorter,
    ``(now − heard) / WHOLE_FLEET_TIMEOUTS`` (no node read meanwhile: the wall clock, with a
    second timeout of grace); ``now − heard`` when no node was ever heard from. Never negative.
    """
    heard = last_heartbeat if last_heartbeat is not None else registered_at
    wall = max(0.0, (now - heard).total_seconds())
    if newest is None:
        return wall
    read = max(0.0, (min(newest, now) - heard).total_seconds())
    return max(read, wall / WHOLE_FLEET_TIMEOUTS)


def is_silent(
    last_heartbeat: datetime | None,
    registered_at: datetime,
    newest: datetime | None,
    now: datetime,
    timeout_s: float,
) -> bool:
    """Whether a node is silent past ``timeout_s`` seconds (:func:`silent_for_s` > ``timeout_s``)."""
    return silent_for_s(last_heartbeat, registered_at, newest, now) > timeout_s
