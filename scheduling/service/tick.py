"""One step of the scheduler: the heartbeat check, then a round. The one loop body of every
driver: Celery's ``sharewise.run_round`` task, ``manage.py run_scheduler`` and the demo."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from scheduling.core import types as core
from scheduling.models import Round
from scheduling.service.heartbeats import check_heartbeats
from scheduling.service.rounds import run_round


@dataclass(slots=True)
class Tick:
    """What one :func:`tick` did: ``unhealthy`` — ``{node name: [requeued job ids]}`` of the nodes
    the heartbeat check marked now; ``round`` — the round's record (``None``: another round held
    the lease; ``pk`` ``None``: unchanged, not recorded again)."""

    unhealthy: dict[str, list[int]] = field(default_factory=dict)
    round: Round | None = None


def tick(
    now: datetime | None = None,
    policy: str | core.Policy | None = None,
    profile: core.Profile | None = None,
    lease_wait_s: float = 0.0,
) -> Tick:
    """Mark the nodes silent past ``SHAREWISE_HEARTBEAT_TIMEOUT_S`` unhealthy and requeue their
    jobs (:func:`~scheduling.service.heartbeats.check_heartbeats`), then run one round at ``now``
    (:func:`~scheduling.service.rounds.run_round`: ``policy`` a name or an object, default setting
    ``SHAREWISE_POLICY``; waiting up to ``lease_wait_s`` seconds while another holder has the
    round lease), so the round already sees the freed GPUs. Raises what the round raises
    (``UnknownPolicyError``, database errors)."""
    unhealthy = check_heartbeats(now)
    return Tick(unhealthy, run_round(now=now, policy=policy, profile=profile, lease_wait_s=lease_wait_s))
