"""Token authentication: tenants' API tokens (with the tenant in the same query) and node agents' tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, TokenAuthentication, get_authorization_header
from rest_framework.request import Request

from agent.messages import NODE_TOKEN_REQUIRED

if TYPE_CHECKING:  # imported where used: cluster.exceptions imports DRF's views, which load this module
    from cluster.exceptions import CodedPermissionDenied


class TenantTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``: a tenant member's API token, found by its SHA-256
    (:class:`cluster.api_tokens.ApiToken`, never stored in clear), with the user, membership and
    tenant in the same query, or from the shared cache (:mod:`cluster.token_cache`: no query,
    and a replaced or revoked token still fails on its next request).

    Raises ``AuthenticationFailed`` (401) for an unknown token or an inactive user.
    """

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        from cluster.token_cache import find_token

        token = find_token(key)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return token.user, token


class NodeTokenAuthentication(BaseAuthentication):
    """``Authorization: Node <token>``: the node agent's token (docs/AGENT.md §2–3).

    ``request.auth`` becomes the :class:`~cluster.models.Node`; ``request.user`` stays anonymous.
    No header: not authenticated (401 from :class:`IsNodeAgent`); a wrong node token: 401.
    Other credentials (``Token <key>``, a tenant's API token; ``Bearer``, ``Basic``): 403 coded
    ``node_token_required`` (:func:`wrong_kind_of_credentials`) — they were given, but are not
    what this endpoint takes, and DRF alone would answer "Authentication credentials were not
    provided.".
    """

    keyword = "Node"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts:
            return None
        if parts[0].lower() != self.keyword.lower().encode():
            raise wrong_kind_of_credentials(parts[0])
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid Node header: expected 'Node <token>'.")
        try:
            raw = parts[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid node token.") from None
        from cluster.tokens import node_for_token

        node = node_for_token(raw)
        if node is None:
            raise exceptions.AuthenticationFailed("Invalid node token.")
        return AnonymousUser(), node

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


def wrong_kind_of_credentials(scheme: bytes) -> CodedPermissionDenied:
    """The 403 for an agent endpoint called with ``Authorization: <scheme> ...`` other than
    ``Node``: ``{"error": "this endpoint takes a node agent's token ...", "code":
    "node_token_required"}`` (the agent stops on the code, :mod:`agent.reporter`)."""
    from cluster.exceptions import CodedPermissionDenied

    name = scheme.decode("latin-1")
    if name.lower() == TenantTokenAuthentication.keyword.lower():
        given = "a tenant's API token ('Token ...')"
    elif name.isascii() and name.isprintable() and len(name) <= 32:
        given = f"'{name}' credentials"
    else:
        given = "other credentials"
    return CodedPermissionDenied(
        f"this endpoint takes a node agent's token, sent as 'Authorization: Node <token>' (printed "
        f"when the node was registered), not {given}",
        NODE_TOKEN_REQUIRED,
    )


class NodeTokenScheme(OpenApiAuthenticationExtension):
    """OpenAPI security scheme of :class:`NodeTokenAuthentication` (an API key in the header)."""

    target_class = "cluster.authentication.NodeTokenAuthentication"
    name = "nodeToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "The node agent's token: `Node <token>` (docs/AGENT.md).",
        }
