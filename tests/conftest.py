"""Shared test fixtures.

Tests that need a real service or the public data skip with a visible reason when it is absent,
except under ``SHAREWISE_REQUIRE_SERVICES=1`` (set by ``.ci/run``), where a missing service is a
failure, not a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scheduling.datapaths import shared_data_dir

REQUIRE_SERVICES = os.environ.get("SHAREWISE_REQUIRE_SERVICES") == "1"

# The services, commands and agents that tests start as subprocesses must show their output
# without PYTHONUNBUFFERED, as they do for an operator and in CI (a shell that set it hid that
# run_scheduler and the demo left their lines in a block buffer when writing to a pipe or file).
os.environ.pop("PYTHONUNBUFFERED", None)


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``, or fail when services are required (CI)."""
    if REQUIRE_SERVICES:
        pytest.fail(f"SHAREWISE_REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The public data folder (``../shared/data``); skips with a reason when it is absent."""
    path = shared_data_dir()
    if not (path / "traces").is_dir():
        pytest.skip(f"public data folder not found at {path} (set SHAREWISE_DATA_DIR)")
    return path


@pytest.fixture(autouse=True)
def _forget_job_tenants() -> None:
    """Each test starts with no job's tenant remembered (``cluster.job_tenants``): a database rolled
    back gives the next test's jobs the same ids, maybe with other tenants."""
    from cluster import job_tenants

    job_tenants.forget()


@pytest.fixture(autouse=True)
def _forget_learned_classes() -> None:
    """Each test starts with no learned class kept (``knowledge.recent_class_records``): a class a
    rolled-back test learned must not be in the next test's answers."""
    from scheduling.service import knowledge

    knowledge.forget_class_records()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it), for a server a test
    starts."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
