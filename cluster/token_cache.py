"""A tenant API token's row (with its user, membership and tenant) kept briefly in the shared cache.

Why: every job submission authenticates, and the token query (a four-table join) with its ORM
compilation cost as much CPU as the rest of the request's reads together (issue 16). A cached
row saves it; a token that stops being valid must stop working on the next request though,
whichever web process answers it, so the row lives in the **shared** cache (Redis in
production, where the throttle's counters already are), never in one process's memory, and every
change that could make it wrong deletes it:

- the token replaced (``POST /api/v1/tenant/token/``) or deleted: its old digest's entry;
- the user saved (deactivated, renamed) or deleted, the membership saved or deleted (moved to
  another tenant, removed), the tenant saved (its ``default_sharing``) or deleted: the entries of
  every token of the users concerned.

Each deletion happens at once and again when the transaction commits, so a request that read the
old row just before the commit cannot leave it behind (its entry is deleted after). A read that
started before the change and stores its row after both deletions is the one race left; the entry's
lifetime, ``SHAREWISE_TOKEN_CACHE_S`` (s, default 60 with a shared cache), bounds it. ``0`` turns the
cache off; with a process-local cache (``locmem``, the embedded default) it is off unless the
setting is given, since a second web process could not see a deletion. A cache that does not answer
is skipped (the database is asked), never a failed request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save

from cluster.api_tokens import ApiToken
from cluster.cache_forget import forget_keys
from cluster.cache_reads import Getter
from cluster.models import Membership, Tenant
from common.tokens import hash_token
from scheduling.service.health import CACHE_ERRORS

#: Cache key of a token's row, by the token's SHA-256 (what the database keeps too).
KEY = "sharewise:api-token:{digest}"
#: Lifetime (s) of an entry when ``SHAREWISE_TOKEN_CACHE_S`` is not set and the cache is shared.
DEFAULT_LIFETIME_S = 60.0


def lifetime_s() -> float:
    """Seconds a token's row stays cached: ``SHAREWISE_TOKEN_CACHE_S`` if set, else
    :data:`DEFAULT_LIFETIME_S` with a shared cache (Redis) and 0 (off) with a process-local one."""
    configured = getattr(settings, "SHAREWISE_TOKEN_CACHE_S", None)
    if configured is not None:
        return float(configured)
    backend = str(settings.CACHES["default"]["BACKEND"])
    return DEFAULT_LIFETIME_S if backend.endswith("RedisCache") else 0.0


def cache_key(raw: str) -> str | None:
    """The cache key of the row of token ``raw`` (by its digest, :data:`KEY`), or ``None`` when
    the token cache is off (:func:`lifetime_s` 0): :func:`find_token` then asks the database."""
    return KEY.format(digest=hash_token(raw)) if lifetime_s() > 0 else None


def find_token(raw: str, get: Getter | None = None) -> ApiToken | None:
    """The token row of ``raw`` with user, membership and tenant loaded (as
    :meth:`ApiToken.find`), from the cache when present (no query), else from the database (one
    query) and then cached; ``None`` for an unknown token (not cached: a wrong token costs its
    query each time, as before). ``get``: what reads the cache in place of ``cache.get``, the
    :func:`cluster.cache_reads.read_together` of the request's entries with :func:`cache_key`
    among them (one round trip for them all)."""
    key = cache_key(raw)
    if key is None:
        return ApiToken.find(raw)
    try:
        token = (get or cache.get)(key)
    except CACHE_ERRORS:
        return ApiToken.find(raw)
    if token is not None:
        return token
    token = ApiToken.find(raw)
    if token is not None:
        try:
            cache.set(key, token, timeout=lifetime_s())
        except CACHE_ERRORS:
            pass  # the next request asks the database again
    return token


def forget_digests(digests: Iterable[str]) -> None:
    """Delete the cached rows of the tokens with these SHA-256 ``digests``, now and again when the
    current transaction commits (see the module docstring). An unreachable cache is skipped: its
    entries then end with their lifetime."""
    forget_keys([KEY.format(digest=d) for d in digests if d])


def forget_users(user_ids: Iterable[int]) -> None:
    """:func:`forget_digests` of every token of the users ``user_ids`` (one query)."""
    ids = [i for i in user_ids if i is not None]
    if ids:
        forget_digests(ApiToken.objects.filter(user_id__in=ids).values_list("digest", flat=True))


def _token_replaced(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    """Before a token row is saved: forget the digest it had (a new token replaces it)."""
    if instance.pk is not None:
        forget_digests(ApiToken.objects.filter(pk=instance.pk).values_list("digest", flat=True))


def _token_deleted(sender: Any, instance: ApiToken, **kwargs: Any) -> None:
    forget_digests([instance.digest])


def _user_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    forget_users([instance.pk])


def _membership_changed(sender: Any, instance: Membership, **kwargs: Any) -> None:
    forget_users([instance.user_id])


def _tenant_changed(sender: Any, instance: Tenant, **kwargs: Any) -> None:
    if instance.pk is not None:
        forget_users(Membership.objects.filter(tenant_id=instance.pk).values_list("user_id", flat=True))


def connect() -> None:
    """Connect the deletions above to the models' save and delete signals (``ClusterConfig.ready``).

    A tenant and a user are forgotten *before* their deletion (their memberships and tokens are
    gone after), the rest after the save or deletion. A ``QuerySet.update()`` sends no signal: its
    entries end with their lifetime."""
    pre_save.connect(_token_replaced, sender=ApiToken, dispatch_uid="token_cache.token_saved")
    post_delete.connect(_token_deleted, sender=ApiToken, dispatch_uid="token_cache.token_deleted")
    user_model = get_user_model()
    post_save.connect(_user_changed, sender=user_model, dispatch_uid="token_cache.user_saved")
    pre_delete.connect(_user_changed, sender=user_model, dispatch_uid="token_cache.user_deleted")
    post_save.connect(_membership_changed, sender=Membership, dispatch_uid="token_cache.membership_saved")
    post_delete.connect(_membership_changed, sender=Membership, dispatch_uid="token_cache.membership_deleted")
    post_save.connect(_tenant_changed, sender=Tenant, dispatch_uid="token_cache.tenant_saved")
    pre_delete.connect(_tenant_changed, sender=Tenant, dispatch_uid="token_cache.tenant_deleted")
