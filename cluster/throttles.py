"""Per-tenant throttling of job submissions."""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from cluster.permissions import tenant_of


class SubmissionThrottle(SimpleRateThrottle):
    """At most ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["job_submit"]`` submissions per tenant.

    The rate is read at each request (not at import), so settings overrides and the
    ``SHAREWISE_SUBMIT_RATE`` environment variable take effect; ``None`` disables the throttle.
    All members of a tenant share one budget. ``timer`` may be replaced in tests (a clock).
    """

    scope = "job_submit"

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        tenant = tenant_of(request)
        if tenant is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": tenant.pk}
