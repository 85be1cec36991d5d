"""``GET /api/v1/agent/orders/?after=N&wait=S``: a node agent pulls its placements (docs/AGENT.md
§1a), the transport without a broker — like the kubelet watching the API server.

The node is the token's (``Authorization: Node <token>``): no other node's orders are ever
visible. ``after`` acknowledges the orders up to it; the answer holds the ones after it, waiting
up to ``wait`` seconds for one to come (:func:`scheduling.service.orders.poll_orders`). An
unknown query parameter is a 400, and so is an empty ``after`` or ``wait`` (``?after=``: the
serializer would take the default, 0, silently; ``?node=`` is the token's node), and so is a
number not written in ASCII digits alone (``?after=\u0661``, Arabic-Indic one, was read as 1 by the
serializer's ``int()`` and acknowledged order 1; ``?wait=%20%201`` as 1): the one rule of
:mod:`cluster.query_params`, as the REST API's ``?limit=``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from cluster.agent_serializers import agent_errors
from cluster.authentication import NodeTokenAuthentication
from cluster.permissions import IsNodeAgent, token_node_mismatch
from cluster.query_params import DECIMAL_WORDS, decimal_number, number_too_long, single_or_400, whole_number
from scheduling.service.orders import MAX_WAIT_S, poll_orders

OrdersAnswer = inline_serializer(
    "AgentOrders",
    {
        "cursor": serializers.IntegerField(),
        "orders": inline_serializer(
            "AgentOrder",
            {"seq": serializers.IntegerField(), "message": serializers.DictField()},
            many=True,
        ),
    },
)


class OrdersQuery(serializers.Serializer[Any]):
    """The poll's query: ``after`` (the last order applied, 0 … 2⁶³ − 1), ``wait`` (s) and,
    optional, ``node``: the node the agent polls for (a token of another node: 403)."""

    after = serializers.IntegerField(
        min_value=0,
        max_value=2**63 - 1,
        default=0,
        help_text="The number of the last order applied (0: none); acknowledges every order up to it.",
    )
    wait = serializers.FloatField(
        min_value=0.0,
        max_value=MAX_WAIT_S,
        default=0.0,
        help_text=f"Seconds to wait for an order after `after` (long poll, 0 … {MAX_WAIT_S:g}); "
        "0: answer at once.",
    )
    node = serializers.CharField(
        required=False,
        allow_blank=True,  # `?node=` as a form would send it: the token's own node
        help_text="The node the agent polls for (optional; empty: the token's node); a token of "
        "another node is a `403` with `code` `token_node_mismatch`.",
    )


#: The query's numbers and how each is written (:mod:`cluster.query_params`): an empty one is a
#: 400, not the default, and so is one the parser refuses; the serializer then checks the bounds.
NUMBERS = {
    # the bounds in the words too: an ``after`` of 2**63 or more is refused by its value, all
    # digits (leading zeros are fine: 0000000000000000000001 is 1)
    "after": (whole_number, f"a whole number from 0 to {2**63 - 1} in ASCII digits (0-9)"),
    "wait": (decimal_number, f"a number of seconds from 0 to {MAX_WAIT_S:g}, {DECIMAL_WORDS}"),
}


class AgentOrdersView(generics.GenericAPIView):
    """The calling node's orders after its cursor (docs/AGENT.md §1a)."""

    serializer_class = OrdersQuery
    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]
    throttle_classes: list[Any] = []

    @extend_schema(
        # the query serializer itself: its bounds (wait ≤ MAX_WAIT_S) are in the schema, so a client
        # generated from it never sends what the view refuses
        parameters=[OrdersQuery],
        responses={200: OrdersAnswer, **agent_errors(400, 401, 403)},
    )
    def get(self, request: Request) -> Response:
        unknown = sorted(set(request.query_params) - set(OrdersQuery().fields))
        if unknown:  # a typo (?afer=) would otherwise silently poll from 0
            raise ValidationError({unknown[0]: ["unknown parameter: use after, wait and node"]})
        for name in OrdersQuery().fields:  # the serializer would take the last of two silently
            value = single_or_400(request.query_params, name)
            if value is None or name not in NUMBERS:
                continue
            if value == "":  # ... and the default for an empty one
                raise ValidationError({name: ["is empty: give a number, or leave the parameter out"]})
            too_long = number_too_long(value)
            if too_long is not None:  # not "must be a whole number": it may be one, zero-padded
                raise ValidationError({name: [too_long]})
            parse, words = NUMBERS[name]
            if parse(value) is None:  # int() and float() read "\u0661" and " 1" too
                raise ValidationError({name: [f"must be {words}, got {value[:40]!r}"]})
        query = self.get_serializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        mismatch = token_node_mismatch(request.auth, query.validated_data.get("node") or request.auth.name)
        if mismatch is not None:  # these orders are another node's: the agent must not run them
            return mismatch
        found = poll_orders(request.auth, query.validated_data["after"], query.validated_data["wait"])
        return Response(found.payload())
