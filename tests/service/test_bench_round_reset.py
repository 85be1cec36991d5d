"""``benchmarks/bench_round.py`` times every round from the same state: its ``reset`` must leave
the database as the first round found it, the pull transport's orders included (they used to
pile up, and with them the orders' numbers and the backlog trimming the dispatch pays for)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from cluster.models import Job, Node, Tenant
from scheduling import service
from scheduling.models import AgentOrder, OrderStream
from scheduling.service.orders import pull_dispatch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_round  # noqa: E402  # benchmarks/bench_round.py


@pytest.fixture
def pulled() -> object:
    service.set_dispatcher(pull_dispatch)
    yield
    service.set_dispatcher(None)


def orders() -> list[tuple[str, int, int]]:
    """``(node, seq, job id)`` of every recorded order."""
    return sorted(
        (o.node.name, o.seq, o.message["job_id"]) for o in AgentOrder.objects.select_related("node")
    )


def test_reset_removes_the_orders_so_each_round_starts_equal(
    cluster: list[Node], tenant_a: Tenant, pulled: object, django_capture_on_commit_callbacks: Callable
) -> None:
    job = Job.objects.create(
        tenant=tenant_a, name="j", model="resnet50", batch_size=128, iterations=100, gpus=1
    )
    bench_round.reset()
    with django_capture_on_commit_callbacks(execute=True):
        service.run_round(policy="fifo")
    first = orders()
    assert [(seq, job_id) for _, seq, job_id in first] == [(1, job.pk)]  # one start, order 1 of its node
    bench_round.reset()
    assert not AgentOrder.objects.exists() and not OrderStream.objects.exists()  # as a fresh database
    with django_capture_on_commit_callbacks(execute=True):
        service.run_round(policy="fifo")
    assert orders() == first  # not [1, 2]: the same state, the same orders
