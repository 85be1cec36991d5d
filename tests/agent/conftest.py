"""Fixtures of the node agent's tests: a fake clock, a fake transport, placement messages."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from agent.core import Agent
from agent.executors import EmulatedExecutor
from agent.gpus import declared_gpus
from agent.reporter import TransportError

NODE = "node-00"


class FakeClock:
    """Wall time that moves only when a test says so (s)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class FakeTransport:
    """Records what would be POSTed; ``down`` makes it fail like a dead server, ``reject`` like a 409."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.attempts = 0
        self.down = False
        self.reject: set[str] = set()  # event kinds answered with 409

    def post(self, path: str, payload: dict[str, Any]) -> None:
        self.attempts += 1
        if self.down:
            raise TransportError("connection refused", retryable=True)
        if payload.get("event") in self.reject:
            raise TransportError("HTTP 409: stale generation", retryable=False, status=409)
        self.sent.append((path, payload))

    def events(self) -> list[tuple[int, str, int]]:
        """``(generation, event, iterations_done)`` of each delivered job event, in order."""
        return [
            (p["generation"], p["event"], p["iterations_done"]) for path, p in self.sent if "events" in path
        ]


def placement(job_id: int = 1, generation: int = 1, action: str = "start", **fields: Any) -> dict[str, Any]:
    """The kwargs of one ``sharewise.apply_placement`` task: 100 iterations at 0.5 s, alone."""
    message: dict[str, Any] = {
        "node": NODE,
        "job_id": job_id,
        "generation": generation,
        "action": action,
        "gpu_indices": [0],
        "sub_batch": 32,
        "accum_steps": 1,
        "batch_size": 32,
        "iterations": 100,
        "iterations_done": 0,
        "iter_time_s": 0.5,
        "slowdown": 1.0,
        "model": "resnet18",
        "command": None,
    }
    message.update(fields)
    return message


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def agent(clock: FakeClock) -> Agent:
    """An emulating agent on a 4-GPU node, ``--speedup 10``, progress reported every 1 s."""
    return Agent(NODE, declared_gpus(NODE, 4, 16_000), partial(EmulatedExecutor, speedup=10.0), clock, 1.0)
