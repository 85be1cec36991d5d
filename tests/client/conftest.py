"""The client against a live service: ``live_server`` (Django's threaded test server on a free
port) with a 2 x 4-GPU cluster, tenant team-a (Alice) and team-c (Charlie). The ``sharewise``
command runs in this process (:func:`run`), with the service and token in its environment."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from sharewise.cli import main

from cluster.models import Node, Quota, Tenant


@dataclass
class Result:
    """What one run of the command did: its exit status and what it printed."""

    code: int
    out: str
    err: str


@dataclass
class Service:
    """The live server's URL, the tenants' tokens and the nodes' agent tokens."""

    url: str
    alice: str
    charlie: str
    node_tokens: dict[str, str]


@pytest.fixture
def service(live_server: Any, transactional_db: None) -> Service:
    cache.clear()
    nodes = {f"node-0{i}": Node.register(f"node-0{i}", 4, 16_000, "v100") for i in range(2)}
    _, alice = Tenant.create_with_owner("team-a", quota_gpus=8, username="alice")
    _, charlie = Tenant.create_with_owner("team-c", quota_gpus=8, username="charlie")
    Quota.objects.update(borrow_limit=None)
    return Service(live_server.url, alice, charlie, {name: token for name, (_, token) in nodes.items()})


@pytest.fixture
def run(
    service: Service, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Result]:
    """``run("list", "--output", "json")`` as Alice (``token=`` another); stdin from ``stdin=``."""
    monkeypatch.setenv("SHAREWISE_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("SHAREWISE_API", service.url)

    def invoke(*argv: str, token: str | None = None, stdin: str = "", env: bool = True) -> Result:
        if env:
            monkeypatch.setenv("SHAREWISE_TOKEN", token or service.alice)
        else:
            monkeypatch.delenv("SHAREWISE_TOKEN", raising=False)
            monkeypatch.delenv("SHAREWISE_API", raising=False)
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        codes: list[int] = []
        capsys.readouterr()
        main(["--retries", "0", *argv], exit=codes.append)
        captured = capsys.readouterr()
        return Result(codes[0], captured.out, captured.err)

    return invoke
