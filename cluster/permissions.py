"""Who may call what: tenant members for the tenant API, staff for the admin API."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from agent.messages import TOKEN_NODE_MISMATCH
from cluster.models import Membership, Tenant


def tenant_of(request: Request) -> Tenant | None:
    """The caller's tenant, or ``None`` for an anonymous user or one with no membership.

    :class:`cluster.authentication.TenantTokenAuthentication` has usually loaded it with the
    user; otherwise (session auth) it costs one query, once per user object.
    """
    user = request.user
    if not (user and user.is_authenticated):
        return None
    try:
        return user.membership.tenant
    except Membership.DoesNotExist:
        return None


class IsTenantMember(BasePermission):
    """Authenticated users who belong to a tenant; every object they reach is scoped to it."""

    message = "this account is not a member of any tenant"

    def has_permission(self, request: Request, view: Any) -> bool:
        return tenant_of(request) is not None


class IsNodeAgent(BasePermission):
    """Requests authenticated by a node agent's token (``request.auth`` is the ``Node``)."""

    message = "send the node's agent token as 'Authorization: Node <token>'"

    def has_permission(self, request: Request, view: Any) -> bool:
        from cluster.models import Node

        return isinstance(request.auth, Node)


def token_node_mismatch(node: Any, claimed: str) -> Response | None:
    """The 403 for a report that names node ``claimed`` sent with ``node``'s token, or ``None``
    when they agree. Body: ``{"error", "code": "token_node_mismatch", "token_node", "node"}``
    (``token_node``: whose token it is; ``node``: the node the agent reports for)."""
    if claimed == node.name:
        return None
    return Response(
        {
            "error": f"this token belongs to node {node.name}, not {claimed}",
            "code": TOKEN_NODE_MISMATCH,
            "token_node": node.name,
            "node": claimed,
        },
        status=status.HTTP_403_FORBIDDEN,
    )
