"""Token authentication that loads the caller's tenant in the same query."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication


class TenantTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``; the token, user, membership and tenant come in one query.

    Raises ``AuthenticationFailed`` (401) for an unknown token or an inactive user.
    """

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        model = self.get_model()
        token = model.objects.select_related("user__membership__tenant").filter(key=key).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return token.user, token
