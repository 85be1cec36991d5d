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
        try:  # get(), not first(): no ORDER BY to compile on this hot path
            token = model.objects.select_related("user__membership__tenant").get(key=key)
        except model.DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        return token.user, token
