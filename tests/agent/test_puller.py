"""The pull transport on the agent's side (docs/AGENT.md §1a): cursors, at-least-once delivery
into the agent's generation rule, and backoff — against a fake server that numbers orders as
the real one does (1, 2, 3 … per node; the cursor acknowledges every order up to it)."""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import pytest

from agent.core import Agent, route
from agent.executors import EmulatedExecutor
from agent.gpus import discover_gpus
from agent.messages import ORDERS_PATH, placement_kwargs, stop_kwargs
from agent.puller import Puller
from agent.reporter import TokenRefused, TransportError


class FakeServer:
    """One node's order stream; ``fail`` makes the next polls raise; ``lose`` drops the next answer."""

    def __init__(self) -> None:
        self.orders: list[tuple[int, dict[str, Any]]] = []
        self.queries: list[dict[str, Any]] = []
        self.fail = 0
        self.lose = 0

    def add(self, message: dict[str, Any]) -> None:
        self.orders.append((len(self.orders) + 1, message))

    def get(self, path: str, query: dict[str, Any], timeout_s: float | None = None) -> Any:
        assert path == ORDERS_PATH
        self.queries.append(query)
        if self.fail:
            self.fail -= 1
            raise TransportError("connection refused", retryable=True)
        after = query["after"]
        self.orders = [(s, m) for s, m in self.orders if s > after]  # acknowledged
        answer = {"cursor": self.orders[-1][0] if self.orders else after, "orders": [
            {"seq": s, "message": m} for s, m in self.orders
        ]}  # fmt: skip
        if self.lose:
            self.lose -= 1
            raise TransportError("timed out", retryable=True)
        return answer


def start(job_id: int, generation: int) -> dict[str, Any]:
    return placement_kwargs(
        "n1", job_id, [0], generation=generation, action="start", sub_batch=8, accum_steps=1,
        batch_size=8, iterations=1000, iterations_done=0, iter_time_s=1.0, slowdown=1.0,
        command="", model="resnet50", partners=[],
    )  # fmt: skip


@pytest.fixture
def agent() -> Agent:
    now = [0.0]
    return Agent(
        "n1", discover_gpus("n1", 2, 16_000), partial(EmulatedExecutor, speedup=1.0), clock=lambda: now[0]
    )


def test_orders_reach_the_agent_in_order_and_the_cursor_follows(agent: Agent) -> None:
    server = FakeServer()
    delivered: list[dict[str, Any]] = []
    puller = Puller({"n1": server}, lambda m: delivered.append(m) or route({"n1": agent}, m), wait_s=20)
    server.add(start(7, 1))
    server.add(stop_kwargs("n1", 7, 2))
    assert puller.poll("n1") == 2
    assert delivered == [start(7, 1), stop_kwargs("n1", 7, 2)] and puller.cursors == {"n1": 2}
    assert server.queries == [{"after": 0, "wait": 20, "node": "n1"}]
    assert puller.poll("n1") == 0 and server.queries[-1] == {"after": 2, "wait": 20, "node": "n1"}


def test_a_lost_answer_is_delivered_again_and_the_repeat_is_ignored(agent: Agent) -> None:
    server = FakeServer()
    applied: list[bool] = []
    puller = Puller({"n1": server}, lambda m: applied.append(route({"n1": agent}, m)) or True)
    server.add(start(7, 1))
    server.lose = 1
    with pytest.raises(TransportError):
        puller.poll("n1")
    assert puller.cursors == {"n1": 0}  # nothing acknowledged
    assert puller.poll("n1") == 1 and applied == [True]
    server.orders = [(2, start(7, 1))]  # the same start again (e.g. re-sent): already running
    assert puller.poll("n1") == 1 and applied == [True, False]
    assert [r["job_id"] for r in agent.heartbeat().payload()["running"]] == [7]


def test_failures_back_off_1_2_4_then_reset(agent: Agent) -> None:
    server = FakeServer()
    puller = Puller({"n1": server}, partial(route, {"n1": agent}), backoff_s=1.0, backoff_max_s=4.0)
    waits: list[float] = []

    class Stop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout or 0.0)
            return self.is_set()

    stop = Stop()
    server.fail = 4
    polled = server.get

    def get_then_stop(path: str, query: dict[str, Any], timeout_s: float | None = None) -> Any:
        if len(server.queries) == 4:  # the fifth poll succeeds, then the agent stops
            stop.set()
        return polled(path, query, timeout_s)

    server.get = get_then_stop  # type: ignore[method-assign]
    puller.run(stop)
    # four failures: 1, 2, 4, 4 (capped); then a long poll that succeeds resets the backoff
    assert waits == [1.0, 2.0, 4.0, 4.0] and puller.backoff_s == 1.0


def test_a_fleet_polls_without_waiting_and_a_bad_wait_is_refused(agent: Agent) -> None:
    servers = {"n1": FakeServer(), "n2": FakeServer()}
    puller = Puller(servers, partial(route, {"n1": agent}), wait_s=25)
    assert puller.poll_all()
    assert servers["n2"].queries == [{"after": 0, "wait": 0.0, "node": "n2"}]
    with pytest.raises(ValueError, match="wait_s must be 0"):
        Puller({"n1": servers["n1"]}, print, wait_s=31)


def test_a_malformed_answer_is_an_error_and_changes_no_cursor(agent: Agent) -> None:
    class Broken(FakeServer):
        def get(self, path: str, query: dict[str, Any], timeout_s: float | None = None) -> Any:
            return {"orders": "nope"}

    puller = Puller({"n1": Broken()}, partial(route, {"n1": agent}))
    with pytest.raises(TransportError, match="malformed orders answer"):
        puller.poll("n1")
    assert puller.cursors == {"n1": 0}


def test_a_refused_token_ends_the_pull_and_says_so() -> None:
    """A 401 used to be logged and polled again forever; a 5xx still is retried."""
    calls: list[str] = []

    class Refusing:
        def get(self, path: str, query: dict[str, Any], timeout_s: float | None = None) -> Any:
            calls.append(path)
            if len(calls) == 1:
                raise TransportError("HTTP 503 from x: busy", retryable=True)
            raise TokenRefused("HTTP 401 from /api/v1/agent/orders/: bad token")

    seen: list[TokenRefused] = []
    puller = Puller({"node-00": Refusing()}, lambda m: True, wait_s=0, backoff_s=0.01)
    puller.on_refused = seen.append
    stop = threading.Event()
    thread = threading.Thread(target=puller.run, args=(stop,), daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive() and not stop.is_set()  # it ended by itself, after the 503's retry
    assert len(calls) == 2 and puller.refused is seen[0] and seen[0].node == "node-00"


def test_an_older_server_without_the_node_parameter_is_polled_without_it(agent: Agent) -> None:
    """The orders poll names its node (so that another node's token is refused); a server older
    than that parameter answers 400 ``unknown parameter``: the puller drops it, once."""
    queries: list[dict[str, Any]] = []

    class Older:
        def get(self, path: str, query: dict[str, Any], timeout_s: float | None = None) -> Any:
            queries.append(dict(query))
            if "node" in query:
                raise TransportError(
                    'HTTP 400 from /api/v1/agent/orders/: {"error": "invalid input: node: unknown '
                    'parameter: use after and wait"}',
                    retryable=False,
                    status=400,
                )
            return {"cursor": 0, "orders": []}

    puller = Puller({"n1": Older()}, partial(route, {"n1": agent}), wait_s=0)
    assert puller.poll("n1") == 0 and puller.poll("n1") == 0
    assert queries == [
        {"after": 0, "wait": 0, "node": "n1"},
        {"after": 0, "wait": 0},
        {"after": 0, "wait": 0},
    ]
    assert not puller.names_node
