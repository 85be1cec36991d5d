"""The pull transport of placements (docs/AGENT.md §1a): orders recorded in the database, which
each node's agent long-polls from ``GET /api/v1/agent/orders/`` — like the kubelet watching the
API server — instead of a broker pushing them.

An order is the very ``sharewise.apply_placement`` message the broker would carry (built by
:mod:`scheduling.service.dispatch` with :mod:`agent.messages`). Each node's orders are numbered
1, 2, 3 … in its :class:`~scheduling.models.OrderStream`; the agent sends the number of the last
order it applied (its *cursor*), which acknowledges every order up to it (they are deleted) and
asks for the ones after it. Delivery is at least once: a response lost on the way is sent again
at the next poll with the same cursor, and the agent's generation rule makes a repeat harmless.

Units: seconds (s).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from agent.messages import ORDERS_MAX_WAIT_S
from cluster import plain_rows
from cluster.compiled import meta
from cluster.models import Node
from scheduling.models import AgentOrder, OrderStream
from scheduling.service.bulk import insert_values, quoted_column, quoted_table

#: The longest a poll may wait for an order (s; the wire protocol's); asking for more is a 400.
MAX_WAIT_S = ORDERS_MAX_WAIT_S
#: How often a waiting poll looks at the database (s).
POLL_S = 0.25
#: Most orders one poll returns; the rest come at the next poll.
MAX_ORDERS = 500
#: Most unacknowledged orders kept per node: past it the oldest are dropped (an agent that never
#: polls must not fill the database; heartbeat reconciliation repairs what a returning agent missed).
MAX_BACKLOG = 10_000


@dataclass(frozen=True, slots=True)
class Orders:
    """What one poll answers: ``orders`` — ``[(seq, message)]`` oldest first; ``cursor`` — the
    cursor the agent sends next (the last ``seq`` returned, else the one it sent, brought down
    to the node's newest order when it was past it, e.g. after the database was recreated)."""

    orders: list[tuple[int, dict[str, Any]]]
    cursor: int

    def payload(self) -> dict[str, Any]:
        """The response body: ``{"cursor": int, "orders": [{"seq": int, "message": {...}}]}``."""
        return {"cursor": self.cursor, "orders": [{"seq": s, "message": m} for s, m in self.orders]}


def _reserve(counts: dict[int, int]) -> dict[int, int]:
    """Take ``counts[node id]`` numbers of each node's stream; returns the last number taken per
    node. Call inside a transaction: the streams' rows stay locked until commit.

    One statement, an upsert in node-id order: ``INSERT … VALUES (node, count) … ON CONFLICT
    (node) DO UPDATE SET last_seq = last_seq + count RETURNING node, last_seq``. PostgreSQL (and
    SQLite) handle the rows of ``VALUES`` one after the other, so every writer locks the streams
    it bumps in one order (node id) and none deadlocks another; a stream missing so far is
    created with ``last_seq`` = its count (numbers 1 … count), and one created meanwhile by
    another writer is waited for, then bumped. Before, the same took three queries (which streams
    exist, lock them in order, then one ``UPDATE``), four when a stream was new."""
    node_ids = sorted(counts)
    table = quoted_table(OrderStream)
    key, seq = quoted_column(OrderStream, "node"), quoted_column(OrderStream, "last_seq")
    rows = ", ".join("(%s, %s)" for _ in node_ids)
    params: list[int] = [v for n in node_ids for v in (n, counts[n])]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({key}, {seq}) VALUES {rows} ON CONFLICT ({key}) "
            f"DO UPDATE SET {seq} = {table}.{seq} + excluded.{seq} RETURNING {key}, {seq}",
            params,
        )
        taken = {int(n): int(last) for n, last in cursor.fetchall()}
    return taken


def record_orders(messages: Sequence[dict[str, Any]]) -> int:
    """Record ``messages`` (``apply_placement`` payloads, each naming its ``node``) for their
    nodes' agents to pull, in order, in one transaction; the dispatcher of the pull transport.
    A message for a node that no longer exists is dropped (nobody can pull it). Returns the number
    recorded. A handful of queries whatever the number of nodes: the streams' numbers taken
    together (:func:`_reserve`), the orders inserted together, and the oldest dropped only on a
    node whose backlog passed :data:`MAX_BACKLOG`."""
    by_node: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for message in messages:
        by_node[str(message["node"])].append(message)
    if not by_node:
        return 0
    with transaction.atomic():
        ids = dict(Node.objects.filter(name__in=by_node).values_list("name", "pk"))
        if not ids:
            return 0
        last = _reserve({ids[name]: len(by_node[name]) for name in ids})
        now = timezone.now()
        rows = [
            (ids[name], last[ids[name]] - len(batch) + 1 + i, m, now)
            for name, batch in by_node.items()
            if name in ids
            for i, m in enumerate(batch)
        ]
        recorded = insert_values(AgentOrder, ("node", "seq", "message", "created_at"), rows)
        over = Q()
        for node_id, seq in last.items():
            if seq > MAX_BACKLOG:
                over |= Q(node_id=node_id, seq__lte=seq - MAX_BACKLOG)
        if over:
            AgentOrder.objects.filter(over).delete()
    return recorded


def pull_dispatch(messages: Sequence[dict[str, Any]]) -> None:
    """:func:`record_orders`, as a dispatcher (``scheduling.service.dispatch.Dispatcher``)."""
    record_orders(messages)


@cache
def _orders_sql(vendor: str) -> dict[str, str]:
    """The plain statements of a poll (every report of a pull-transport agent makes one: the
    ORM's compilation of its three reads was half of an empty report's CPU): ``"last"`` (a
    node's newest number; parameter: the node's id), ``"any_done"`` (whether it has orders up to a
    cursor; the node's id, the cursor), ``"after"`` (its orders after a cursor, oldest first; the
    node's id, the cursor, the limit)."""
    q = connection.ops.quote_name
    o, s = meta(AgentOrder), meta(OrderStream)
    node, seq, message = (q(o.get_field(n).column) for n in ("node", "seq", "message"))
    table = q(o.db_table)
    return {
        "last": f"SELECT {q(s.get_field('last_seq').column)} FROM {q(s.db_table)} "
        f"WHERE {q(s.get_field('node').column)} = %s",
        "any_done": f"SELECT 1 FROM {table} WHERE {node} = %s AND {seq} <= %s LIMIT 1",
        "after": f"SELECT {seq}, {message} FROM {table} WHERE {node} = %s AND {seq} > %s "
        f"ORDER BY {seq} LIMIT %s",
    }


def acknowledge(node: Node, cursor: int) -> int:
    """Delete ``node``'s orders numbered up to ``cursor`` (its agent applied them); returns how
    many. Looks before deleting, so that a poll with nothing to acknowledge writes nothing (on
    SQLite a write locks the whole database)."""
    if cursor <= 0:
        return 0
    if not plain_rows.select(_orders_sql(connection.vendor)["any_done"], [node.pk, cursor], (None,)):
        return 0
    return AgentOrder.objects.filter(node=node, seq__lte=cursor).delete()[0]


def last_seq(node: Node) -> int:
    """The number of ``node``'s newest order (0: none yet)."""
    found = plain_rows.select(_orders_sql(connection.vendor)["last"], [node.pk], (None,))
    return int(found[0][0] or 0) if found else 0


def pending_orders(node: Node, after: int, limit: int = MAX_ORDERS) -> Orders:
    """``node``'s orders numbered above ``after`` (at most ``limit``, oldest first) and the next
    cursor (:class:`Orders`: the last number returned, else ``after``)."""
    fields = (None, meta(AgentOrder).get_field("message"))  # the message decoded as the ORM does
    rows = plain_rows.select(_orders_sql(connection.vendor)["after"], [node.pk, after, limit], fields)
    return Orders([(int(s), m) for s, m in rows], int(rows[-1][0]) if rows else after)


def poll_orders(
    node: Node, after: int, wait_s: float, poll_s: float = POLL_S, clock: Callable[[], float] = time.monotonic
) -> Orders:
    """One poll of ``node``'s agent with cursor ``after``: acknowledge the orders up to it
    (:func:`acknowledge`), then return those after it (:func:`pending_orders`), waiting up to
    ``wait_s`` seconds (0 … :data:`MAX_WAIT_S`) for one to come, looking every ``poll_s`` seconds;
    an empty answer when none came. A cursor past the node's newest order (the agent outlived
    its server's database) acknowledges nothing and gets the node's orders from the start, with
    the cursor that follows them. Raises ``ValueError`` for ``wait_s`` or ``after`` out of range
    (the view checks them first)."""
    if not 0 <= wait_s <= MAX_WAIT_S:
        raise ValueError(f"wait must be 0 … {MAX_WAIT_S:g} s, got {wait_s}")
    if after < 0:
        raise ValueError(f"after must be >= 0, got {after}")
    if after > last_seq(node):
        return pending_orders(node, 0)
    acknowledge(node, after)
    deadline = clock() + wait_s
    while True:
        found = pending_orders(node, after)
        left = deadline - clock()
        if found.orders or left <= 0:
            return found
        time.sleep(min(poll_s, left))
