"""Service tests reuse the API fixtures (cluster, Alice, Bob, Charlie and their tenants), and
share ``sent``: the messages a round dispatches."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from scheduling import service
from tests.api.conftest import (  # noqa: F401 - pytest finds fixtures by name in this module
    _fresh_cache,
    alice,
    alice_api,
    bob,
    charlie,
    charlie_api,
    cluster,
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
