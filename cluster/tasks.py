"""Celery task of the cluster app: the heartbeat timeout (``cluster.agents.check_heartbeats``)."""

from __future__ import annotations

from celery import shared_task

from cluster import agents


@shared_task(name="sharewise.check_heartbeats", ignore_result=True)
def check_heartbeats() -> dict[str, list[int]]:
    """Mark silent nodes unhealthy and requeue their jobs; ``{node: [job ids]}`` (Celery beat)."""
    return agents.check_heartbeats()
