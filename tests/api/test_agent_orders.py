"""The pull transport of placements (docs/AGENT.md §1a): ``GET /api/v1/agent/orders/`` and the
orders the dispatcher records for it.

Every expected value is the protocol's: orders of a node numbered 1, 2, 3 … in the order
recorded, the cursor acknowledging every order up to it, nothing of another node.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.models.sql.compiler import SQLCompiler
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agent.messages import placement_kwargs, stop_kwargs
from cluster.models import Job, Node, Tenant
from scheduling import service
from scheduling.models import AgentOrder, OrderStream
from scheduling.service import orders
from scheduling.service.dispatch import agent_transport, celery_dispatch, get_dispatcher, local_dispatch
from tests.api.conftest import JOBS_URL, job_body, token_client
from tests.conftest import skip_or_fail

URL = "/api/v1/agent/orders/"
SAVEPOINTS = ("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")


def agent_client(node: Node) -> APIClient:
    """An agent client of ``node`` (a fresh token is issued)."""
    token = node.issue_agent_token()
    node.save()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Node {token}")
    return client


def start(node: str, job_id: int, generation: int) -> dict[str, Any]:
    """A ``start`` of ``job_id`` on GPU 0 of ``node`` (the wire payload, ``agent.messages``)."""
    return placement_kwargs(
        node, job_id, [0], generation=generation, action="start", sub_batch=32, accum_steps=1,
        batch_size=32, iterations=10, iterations_done=0, iter_time_s=0.1, slowdown=1.0,
        command="python3 examples/steps.py", model="resnet50", partners=[],
    )  # fmt: skip


@pytest.fixture
def two(cluster: list[Node]) -> tuple[APIClient, APIClient]:
    return agent_client(cluster[0]), agent_client(cluster[1])


def test_a_node_gets_its_own_orders_in_order_and_none_of_another(
    cluster: list[Node], two: tuple[APIClient, APIClient]
) -> None:
    a, b = two
    sent = [start("node-00", 7, 1), start("node-01", 8, 1), stop_kwargs("node-00", 7, 2)]
    assert orders.record_orders(sent) == 3
    got = a.get(URL).json()
    assert got == {
        "cursor": 2,
        "orders": [{"seq": 1, "message": sent[0]}, {"seq": 2, "message": sent[2]}],
    }
    assert b.get(URL).json() == {"cursor": 1, "orders": [{"seq": 1, "message": sent[1]}]}


def test_delivery_is_at_least_once_until_the_cursor_acknowledges(
    cluster: list[Node], two: tuple[APIClient, APIClient]
) -> None:
    a, b = two
    orders.record_orders([start("node-00", 7, 1), start("node-01", 8, 1)])
    first = a.get(URL, {"after": 0}).json()
    assert a.get(URL, {"after": 0}).json() == first  # the answer was lost: sent again
    assert a.get(URL, {"after": 1}).json() == {"cursor": 1, "orders": []}
    assert list(AgentOrder.objects.values_list("node__name", "seq")) == [("node-01", 1)]  # acknowledged
    orders.record_orders([stop_kwargs("node-00", 7, 2)])
    assert a.get(URL, {"after": 1}).json()["orders"] == [{"seq": 2, "message": stop_kwargs("node-00", 7, 2)}]
    # node-00's cursor acknowledged none of node-01's orders
    assert b.get(URL, {"after": 0}).json()["cursor"] == 1


def test_a_cursor_past_the_newest_order_starts_again_from_the_first(
    cluster: list[Node], two: tuple[APIClient, APIClient]
) -> None:
    a, _ = two
    assert a.get(URL, {"after": 40}).json() == {"cursor": 0, "orders": []}
    orders.record_orders([start("node-00", 7, 1)])
    # an agent that outlived its server's database: its cursor acknowledges nothing it never saw
    assert a.get(URL, {"after": 40}).json() == {
        "cursor": 1,
        "orders": [{"seq": 1, "message": start("node-00", 7, 1)}],
    }


def test_a_wait_with_no_order_answers_empty(two: tuple[APIClient, APIClient]) -> None:
    a, _ = two
    answer = a.get(URL, {"after": 0, "wait": 0.3})
    assert answer.status_code == 200 and answer.json() == {"cursor": 0, "orders": []}


def test_a_waiting_poll_answers_when_an_order_comes(cluster: list[Node], monkeypatch: Any) -> None:
    """Fake time: the poll looks, sleeps 0.25 s (an order arrives meanwhile), looks again."""
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s
        if len(slept) == 2:
            orders.record_orders([start("node-00", 7, 1)])

    monkeypatch.setattr(orders.time, "sleep", sleep)
    found = orders.poll_orders(cluster[0], 0, wait_s=10, poll_s=0.25, clock=lambda: now[0])
    assert slept == [0.25, 0.25] and found.cursor == 1 and found.orders[0][1]["job_id"] == 7


def test_a_wait_ends_at_its_deadline(cluster: list[Node], monkeypatch: Any) -> None:
    now = [0.0]
    monkeypatch.setattr(orders.time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    found = orders.poll_orders(cluster[0], 0, wait_s=0.6, poll_s=0.25, clock=lambda: now[0])
    assert found == orders.Orders([], 0) and now[0] == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"after": "-1"}, "after"),
        ({"after": "x"}, "after"),
        ({"after": str(2**63)}, "after"),
        ({"wait": "31"}, "wait"),
        ({"wait": "-0.5"}, "wait"),
        ({"wait": "nan"}, "wait"),
        ({"wait": "soon"}, "wait"),
        ({"afer": "3"}, "afer"),
        ({"after": ""}, "after"),  # it used to poll from 0, the default
        ({"wait": ""}, "wait"),
        ({"after": "4", "wait": ""}, "wait"),
    ],
)
def test_bad_parameters_are_400_with_the_field(
    two: tuple[APIClient, APIClient], query: dict[str, str], field: str
) -> None:
    answer = two[0].get(URL, query)
    assert answer.status_code == 400
    assert answer.json()["error"].startswith(f"invalid input: {field}: ")


@pytest.mark.parametrize("query", ["after=0&after=5", "wait=0&wait=0"])
def test_a_parameter_given_twice_is_400_with_the_field(two: tuple[APIClient, APIClient], query: str) -> None:
    """The serializer used to read the last of the two (``after=0&after=5`` acknowledged 5)."""
    answer = two[0].get(f"{URL}?{query}")
    assert answer.status_code == 400
    name = query.split("=")[0]
    assert answer.json()["fields"] == {
        name: [f"given 2 times ({query[len(name) + 1]}, {query[-1]}); give it once"]
    }


def test_only_a_node_token_may_poll(cluster: list[Node], tenant_a: Tenant, alice: Any) -> None:
    assert APIClient().get(URL).status_code == 401
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION="Node not-a-token")
    assert stranger.get(URL).json() == {"error": "Invalid node token."}
    assert token_client(alice).get(URL).status_code in (401, 403)


def test_a_poll_for_another_node_is_a_coded_403_and_acknowledges_nothing(
    cluster: list[Node], two: tuple[APIClient, APIClient]
) -> None:
    """node-00's token polling for node-01 used to get node-00's orders (the query named no
    node); now the agent names its node and a token of another one is refused with the code the
    agent stops on (docs/AGENT.md §4)."""
    a, _ = two
    orders.record_orders([start("node-00", 7, 1)])
    answer = a.get(URL, {"node": "node-01"})
    assert answer.status_code == 403
    assert answer.json() == {
        "error": "this token belongs to node node-00, not node-01",
        "code": "token_node_mismatch",
        "token_node": "node-00",
        "node": "node-01",
    }
    assert a.get(URL, {"node": "node-00"}).json()["cursor"] == 1  # its own name: its orders


def test_the_poll_is_a_get(two: tuple[APIClient, APIClient]) -> None:
    assert two[0].post(URL, {}).status_code == 405


def test_a_node_that_no_longer_exists_gets_no_orders_recorded(cluster: list[Node]) -> None:
    assert orders.record_orders([start("gone", 1, 1), start("node-00", 2, 1)]) == 1
    assert list(AgentOrder.objects.values_list("node__name", "seq")) == [("node-00", 1)]


def test_the_backlog_of_a_silent_agent_is_bounded(cluster: list[Node], monkeypatch: Any) -> None:
    monkeypatch.setattr(orders, "MAX_BACKLOG", 3)
    orders.record_orders([start("node-00", j, 1) for j in range(5)])
    assert list(AgentOrder.objects.values_list("seq", flat=True)) == [3, 4, 5]


def test_orders_for_many_nodes_take_a_handful_of_queries(db: None) -> None:
    """A round that places jobs on 16 nodes records their orders in 2 queries, the first time as
    after (the nodes, and one upsert that creates or bumps their streams and returns their
    numbers), plus one call for all the orders (an ``executemany`` of the INSERT here on SQLite,
    logged as "32 times: INSERT …"; on PostgreSQL a COPY, which Django's query log does not
    see) — not 4 per node: the old code took 65 for 16 nodes, the last one 5 the first time and
    4 after. Each node's orders are still numbered 1,
    2, … in the order given, the second call's after the first's."""
    names = [Node.register(f"n{i:02d}", 1, 16_000, "v100")[0].name for i in range(16)]
    messages = [start(n, j, 1) for j in (1, 2) for n in names]
    for expected in (2, 2):
        with CaptureQueriesContext(connection) as queries:
            assert orders.record_orders(messages) == 32
        statements = [
            q["sql"] for q in queries.captured_queries if not q["sql"].upper().startswith(SAVEPOINTS)
        ]
        inserts = [
            q
            for q in statements
            if re.sub(r"^\d+ times: ", "", q).upper().startswith('INSERT INTO "SCHEDULING_AGENTORDER"')
        ]
        assert len(statements) - len(inserts) == expected, statements
        assert len(inserts) == (1 if connection.vendor == "sqlite" else 0)
    rows = AgentOrder.objects.filter(node__name="n05").order_by("seq")
    assert [(seq, m["job_id"]) for seq, m in rows.values_list("seq", "message")] == [
        (1, 1),
        (2, 2),
        (3, 1),
        (4, 2),
    ]
    assert set(OrderStream.objects.values_list("last_seq", flat=True)) == {4}


def test_transport_setting_chooses_the_dispatcher() -> None:
    with override_settings(SHAREWISE_AGENT_TRANSPORT="pull"):
        assert get_dispatcher() is orders.pull_dispatch
    with override_settings(SHAREWISE_AGENT_TRANSPORT="Push", CELERY_BROKER_URL="memory://"):
        assert agent_transport() == "push" and get_dispatcher() is local_dispatch
    with override_settings(
        SHAREWISE_AGENT_TRANSPORT="push", CELERY_BROKER_URL="redis://x:6379/0", CELERY_TASK_ALWAYS_EAGER=False
    ):
        assert get_dispatcher() is celery_dispatch
    with override_settings(SHAREWISE_AGENT_TRANSPORT="carrier-pigeon"), pytest.raises(ImproperlyConfigured):
        get_dispatcher()


@override_settings(SHAREWISE_AGENT_TRANSPORT="pull")
def test_a_round_records_its_start_for_the_node_to_pull(
    cluster: list[Node], tenant_a: Tenant, alice: Any, django_capture_on_commit_callbacks: Callable[..., Any]
) -> None:
    submitted = token_client(alice).post(JOBS_URL, job_body(gpus=1, command="python3 -V"), format="json")
    assert submitted.status_code == 201, submitted.content
    with django_capture_on_commit_callbacks(execute=True):
        service.tick(policy="fifo")
    job = Job.objects.get(pk=submitted.json()["id"])
    assert job.status == Job.Status.RUNNING
    node = job.placements.get().gpu.node
    got = agent_client(node).get(URL).json()
    [order] = got["orders"]
    assert order["seq"] == 1 and got["cursor"] == 1
    message = order["message"]
    assert (message["node"], message["job_id"], message["action"]) == (node.name, job.pk, "start")
    assert message["command"] == "python3 -V"


def test_concurrent_writers_number_orders_without_gaps_and_a_poller_skips_none(
    transactional_db: None, cluster: list[Node]
) -> None:
    """Eight threads record 5 orders each for both nodes at once (half of them naming node-01
    first) — twice: when the nodes have no stream yet, then when they have — while node-00's
    agent polls: each node's orders are 1 … 80, each call's five consecutive and in its order,
    and the poller — whose cursor deletes what it passed — saw all 80. PostgreSQL only: SQLite
    has one writer at a time."""
    if connection.vendor != "postgresql":
        skip_or_fail("needs PostgreSQL (set DATABASE_URL=postgres://...) for concurrent writers")
    threads, each, calls = 8, 5, 2
    total = threads * each * calls
    start_line = threading.Barrier(threads + 1)
    second = threading.Barrier(threads)
    seen: list[int] = []
    done = threading.Event()

    def writer(i: int) -> None:
        try:
            start_line.wait()
            names = ["node-01", "node-00"] if i % 2 else ["node-00", "node-01"]
            for call in range(calls):
                if call:
                    second.wait()
                jobs = [1000 * i + 100 * call + k for k in range(each)]
                orders.record_orders([start(n, j, 1) for j in jobs for n in names])
        finally:
            connection.close()

    def poller() -> None:
        try:
            start_line.wait()
            node, cursor = Node.objects.get(name="node-00"), 0
            while len(seen) < total and not done.wait(0.01):
                found = orders.poll_orders(node, cursor, wait_s=0)
                seen.extend(s for s, _ in found.orders)
                cursor = found.cursor
        finally:
            connection.close()

    pool = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    pool.append(threading.Thread(target=poller))
    for thread in pool:
        thread.start()
    for thread in pool[:-1]:
        thread.join()
    pool[-1].join(timeout=30)
    done.set()
    assert seen == list(range(1, total + 1))
    rows = list(AgentOrder.objects.filter(node__name="node-01").values_list("seq", "message"))
    assert [s for s, _ in rows] == list(range(1, total + 1))
    by_call: dict[int, list[tuple[int, int]]] = {}
    for seq, message in rows:
        by_call.setdefault(message["job_id"] // 100, []).append((seq, message["job_id"] % 100))
    assert len(by_call) == threads * calls
    for got in by_call.values():
        assert [k for _, k in got] == list(range(each)) and got[-1][0] - got[0][0] == each - 1


def test_a_poll_is_three_plain_statements_and_compiles_no_query(
    cluster: list[Node], monkeypatch: Any
) -> None:
    """A poll reads the node's newest number, looks for orders to acknowledge (a cursor above 0)
    and reads the orders after the cursor: 3 plain statements when there is nothing left to
    acknowledge, 2 with cursor 0, one DELETE more when there is; no query compiled by the ORM's
    SELECT compiler (3 before: half of an empty batch report's CPU). The orders are those of the
    ORM's reads: messages decoded, oldest first, at most the limit."""
    node = cluster[0]
    sent = [start("node-00", j, 1) for j in range(1, 6)]
    assert orders.record_orders(sent) == 5
    compiled: list[Any] = []
    as_sql = SQLCompiler.as_sql
    monkeypatch.setattr(
        SQLCompiler, "as_sql", lambda self, *a, **k: compiled.append(1) or as_sql(self, *a, **k)
    )
    counts = []
    for after in (0, 2, 2):
        with CaptureQueriesContext(connection) as queries:
            found = orders.poll_orders(node, after, 0.0)
        counts.append(len(queries.captured_queries))
    assert (counts, compiled) == ([2, 4, 3], [])
    assert found.orders == [(3, sent[2]), (4, sent[3]), (5, sent[4])] and found.cursor == 5
    assert orders.record_orders(sent[:2]) == 2  # numbered 6 and 7
    assert orders.pending_orders(node, 0, limit=2).orders == [(3, sent[2]), (4, sent[3])]
    assert (orders.last_seq(node), orders.last_seq(cluster[1])) == (7, 0)
    assert orders.acknowledge(node, 4) == 2 and orders.acknowledge(node, 4) == 0
    assert orders.pending_orders(node, 0).cursor == 7
