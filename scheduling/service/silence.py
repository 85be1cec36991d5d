"""When a node counts as silent: the heartbeat timeout judged against what the service could read,
on top of the service's own latency as the agents measured it.

A node's silence is measured from its last heartbeat to the **newest heartbeat the service has
read from any node**, not to the wall clock. When the service stops reading altogether (a round
holding the database, every web thread queued), every node's heartbeats wait unread alike, the
newest one read grows old with them, and no node is blamed for the service's delay. When one
agent really dies, the others' heartbeats keep being read, so its silence is counted in full.

That alone does not cover a service that is merely **slow**. Each agent's loop is synchronous: it
sends a report (heartbeat or batch report, docs/AGENT.md §2b–3) and waits for the answer before
its next one. When the service answers in W s, each node is read about W s apart, staggered, while
the *other* nodes' reads keep refreshing the newest heartbeat: ``newest − heard`` reaches about W
for every node in turn, and with W above the timeout healthy nodes were marked silent exactly when
the service was overloaded (125 false marks in a 15,000-job run at load 13; throughput 9 → 2
jobs/s from the requeues). So each agent measures, on its own monotonic clock, how long its
previous report took from send to answer and sends it with its heartbeat (``report_latency_s``,
stored on the node), and the timeout counts **on top of an allowance**: a node is silent when its
silence exceeds ``timeout + allowance``, the allowance being the fleet's report latency.

The allowance is the **lower median** of the latencies last reported by the ``ready`` nodes that
were heard from (:func:`fleet_allowance_s`): a value that more than half of them reported or
exceeded. Every node waits in the same queues of the same service, so under load they all report
about W and the median is W. One slow node (its own network, a pathological reading) cannot raise
it, so it cannot hide a dead node; the maximum or a high percentile would let a single node add
its latency to every other node's detection time. A dead node cannot lower it either: it reports
nothing, its last value stays. Nodes never heard from are left out (they measured nothing); older
agents, which do not send the field, count as 0, the rule without an allowance (the strict side).
The value is the *previous* report's: only a latency that grows by more than the timeout between
two reports of a node can still have it marked.

**The allowance is capped** at ``SHAREWISE_SILENCE_ALLOWANCE_MAX_S`` (default 60 s; 0 … 3600,
checked when the settings load) **(ours)**. Uncapped, it reached the field's bound
(``MAX_REPORT_LATENCY_S``, an hour): a fleet that last reported an hour's latency (a service
stalled on a lock) and then died went unnoticed for up to two hours, while the service ran again.
What the cap trades: a service answering slower than it marks healthy nodes silent once more
(requeues, the failure above), but one that slow is broken anyway, and the requeue is bounded in
time. 60 s is above the latencies measured under load: in the loaded 15,000-job run of
docs/PERFORMANCE.md §10 healthy nodes were read up to 32 s apart before the allowance, up to 52 s
after. With the default timeout (15 s) a dead node is then found within 75 s (150 s when the whole
fleet fell silent), below Kubernetes' default time to evict the pods of an unreachable node (40 s
of ``--node-monitor-grace-period`` plus 300 s of the ``unreachable`` toleration).

**Detection bounds.** A dead agent among live ones is marked once the service has read the
others' heartbeats ``timeout + allowance`` past its last one: within the timeout when the service
is fast (the allowance is then about 0), within ``timeout + W`` when the fleet measures W, at most
``timeout + cap`` (and that only if a majority of nodes report the cap or more), plus the time to
the next check. What this cannot tell apart: every node falling silent at
once — the whole fleet died, or the service read nothing at all. Then silence is counted against
the wall clock with a second timeout of grace (detection within ``2 × (timeout + allowance)``),
the same caution as Kubernetes' node lifecycle controller, which stops evicting when every node
of a zone is unreachable at once (``--unhealthy-zone-threshold``). A node never heard from is
judged from its registration (``created_at``); while no node at all has sent a heartbeat there is
nothing to compare with, and the wall clock is used with one timeout (an agent that never starts).

Units: seconds (s).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from cluster.models import Node

#: How many timeouts of wall-clock silence make a node silent even though no node's heartbeat
#: was read meanwhile (the whole fleet silent at once; module docstring) **(ours)**.
WHOLE_FLEET_TIMEOUTS = 2


def heartbeat_timeout_s() -> float:
    """Seconds of silence after which a node is unreachable: its GPUs take no new job (setting
    ``SHAREWISE_HEARTBEAT_TIMEOUT_S``; AGENT.md §3 suggests three heartbeat intervals)."""
    return float(settings.SHAREWISE_HEARTBEAT_TIMEOUT_S)


def allowance_cap_s() -> float:
    """The most (s) the allowance may be: setting ``SHAREWISE_SILENCE_ALLOWANCE_MAX_S``, 0 … 3600
    (config/settings.py refuses other values when it loads; module docstring)."""
    return float(settings.SHAREWISE_SILENCE_ALLOWANCE_MAX_S)


@dataclass(frozen=True, slots=True)
class Hearing:
    """What the service has heard from its fleet, read once per check (:func:`fleet_hearing`):
    ``newest``, the newest heartbeat read from any node (``None``: none yet), and ``allowance_s``,
    the fleet's report latency (s, :func:`fleet_allowance_s`, capped) counted on top of the timeout."""

    newest: datetime | None
    allowance_s: float = 0.0


def fleet_allowance_s(latencies: Iterable[float], cap_s: float) -> float:
    """The allowance (s) from the report latencies (s) of the ready nodes heard from: their lower
    median (a value that more than half of them reported or exceeded; module docstring), at most
    ``cap_s`` (s, :func:`allowance_cap_s`), 0 for none. E.g. cap 60: ``[0, 20, 20, 3600]`` → 20,
    ``[0, 3600]`` → 0, ``[90, 3600, 3600]`` → 60."""
    values = list(latencies)
    return min(float(statistics.median_low(values)), cap_s) if values else 0.0


def fleet_hearing() -> Hearing:
    """The :class:`Hearing` of the fleet now, in one query (each node's status, last heartbeat
    and last reported latency); the allowance capped at :func:`allowance_cap_s`."""
    newest: datetime | None = None
    latencies: list[float] = []
    for status, heard, latency in Node.objects.order_by().values_list(
        "status", "last_heartbeat", "report_latency_s"
    ):
        if heard is None:
            continue
        newest = heard if newest is None or heard > newest else newest
        if status == Node.Status.READY:
            latencies.append(latency)
    return Hearing(newest, fleet_allowance_s(latencies, allowance_cap_s()))


def silent_for_s(
    last_heartbeat: datetime | None, registered_at: datetime, newest: datetime | None, now: datetime
) -> float:
    """How long (s) a node counts as silent, to compare with the timeout.

    ``last_heartbeat``: its last one read (``None``: never heard from, then ``registered_at``);
    ``newest``: :attr:`Hearing.newest`; ``now``: the check's time. The silence is
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
    hearing: Hearing,
    now: datetime,
    timeout_s: float,
) -> bool:
    """Whether a node is silent past ``timeout_s`` seconds on top of the fleet's report latency:
    :func:`silent_for_s` (against ``hearing.newest``) > ``timeout_s + hearing.allowance_s``."""
    silence = silent_for_s(last_heartbeat, registered_at, hearing.newest, now)
    return silence > timeout_s + hearing.allowance_s
