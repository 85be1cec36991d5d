"""Who may call what: tenant members for the tenant API, staff for the admin API."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from cluster.models import Membership, Tenant


def tenant_of(request: Request) -> Tenant | None:
    """The caller's tenant (cached on the request), or ``None`` for a user with no membership."""
    if not hasattr(request, "_sharewise_tenant"):
        membership = None
        if request.user and request.user.is_authenticated:
            membership = Membership.objects.select_related("tenant").filter(user_id=request.user.pk).first()
        request._sharewise_tenant = membership.tenant if membership else None
    return request._sharewise_tenant


class IsTenantMember(BasePermission):
    """Authenticated users who belong to a tenant; every object they reach is scoped to it."""

    message = "this account is not a member of any tenant"

    def has_permission(self, request: Request, view: Any) -> bool:
        return tenant_of(request) is not None
