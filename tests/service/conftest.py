"""Service tests reuse the API fixtures (cluster, Alice, Bob, Charlie and their tenants), and
share ``sent``: the messages a round dispatches."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cluster.models import Node, Tenant
from scheduling import service
from tests.api.conftest import (  # noqa: F401 - pytest finds fixtures by name in this module
    _fresh_cache,
    alice,
    alice_api,
    bob,
    charlie,
    charlie_api,
    cluster,
    staff_api,
    tenant_a,
    tenant_c,
)


@pytest.fixture
def sent(django_capture_on_commit_callbacks: Callable) -> Iterator[list[dict[str, Any]]]:
    """Messages dispatched in-process; on-commit callbacks run when the round's transaction ends
    (the test runs them itself, with ``django_capture_on_commit_callbacks``)."""
    messages: list[dict[str, Any]] = []
    service.set_dispatcher(messages.extend)
    yield messages
    service.set_dispatcher(None)


@pytest.fixture
def fleet(db: None) -> dict[str, tuple[Node, str]]:
    """node-00 and node-01 (4 GPUs each) → (node, raw agent token)."""
    return {f"node-0{i}": Node.register(f"node-0{i}", 4, 16_000, "v100") for i in range(2)}


@pytest.fixture
def tenant(db: None) -> Tenant:
    return Tenant.create_with_owner("team-a", quota_gpus=8)[0]
