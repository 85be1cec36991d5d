"""Token authentication: tenants' API tokens (with the tenant in the same query) and node agents' tokens."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, TokenAuthentication, get_authorization_header
from rest_framework.request import Request


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
    No header: not authenticated (401 from :class:`IsNodeAgent`); a wrong token: 401.
    """

    keyword = "Node"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
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
