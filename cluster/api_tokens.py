"""Tenant members' API tokens, kept hashed at rest like the node agents' tokens.

Each member has at most one token, sent as ``Authorization: Token <token>``; the database keeps its
SHA-256 (:func:`common.tokens.hash_token`) and its first characters (to tell tokens apart in the
admin), never the token: it is shown once, when issued, and a member replaces it with
``POST /api/v1/tenant/token/`` (the old one stops working at once).

Why DRF's token scheme with a hashed model rather than a library: clients keep the header they
have, node and tenant tokens share one hashing rule, and nothing is added to the requirements
(django-rest-knox brings per-login expiring tokens and its own views, djangorestframework-api-key
keys that belong to no user; we need one long-lived token per member, tied to its tenant).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from common.tokens import hash_token, new_token

#: Characters of a token kept in clear, to recognise it (6 of 43: nothing to guess from).
PREFIX_LENGTH = 6


class ApiToken(models.Model):
    """A tenant member's API token: its SHA-256 ``digest`` and first characters, never the token."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=PREFIX_LENGTH, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "cluster"
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… of {self.user}"

    @classmethod
    def issue(cls, user: Any) -> tuple[ApiToken, str]:
        """Give ``user`` a new token, replacing the one it had; return the row and the token (the
        only time it is seen)."""
        raw = new_token()
        token, _ = cls.objects.update_or_create(
            user=user,
            defaults={"digest": hash_token(raw), "prefix": raw[:PREFIX_LENGTH], "created_at": timezone.now()},
        )
        return token, raw

    @classmethod
    def find(cls, raw: str) -> ApiToken | None:
        """The token row of ``raw`` with its user, membership and tenant (one query), or ``None``."""
        try:  # get(), not first(): no ORDER BY to compile on this hot path
            return cls.objects.select_related("user__membership__tenant").get(digest=hash_token(raw))
        except cls.DoesNotExist:
            return None
