"""Per-tenant throttling of job submissions: a fixed-window counter in the shared cache."""

from __future__ import annotations

import time
from typing import Any

from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from cluster.permissions import tenant_of


class SubmissionThrottle(BaseThrottle):
    """At most N job submissions per tenant per window, N/window from the ``job_submit`` rate.

    The rate (``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["job_submit"]``, e.g. ``"600/min"``,
    set by ``SHAREWISE_SUBMIT_RATE``) is read at each request, so overrides take effect; ``None``
    disables the throttle. All members of a tenant share one budget.

    Windows are aligned to multiples of their length (a minute window starts at :00). One
    counter per tenant and window is incremented atomically in the cache (Redis in production),
    so all gunicorn workers share it, and the cost per request does not grow with the rate, unlike
    DRF's sliding-window history list. A burst of up to 2N can straddle a window boundary. A view
    with a ``submission_cost(request)`` method (the bulk submission) counts that many submissions.
    ``timer`` (s) may be replaced in tests by a fake clock.
    """

    scope = "job_submit"
    timer = staticmethod(time.time)

    def __init__(self) -> None:
        self.retry_after_s: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        tenant = tenant_of(request)
        if rate is None or tenant is None:
            return True
        limit, window_s = SimpleRateThrottle.parse_rate(None, rate)
        now = self.timer()
        window = int(now // window_s)
        key = f"throttle:{self.scope}:{tenant.pk}:{window}"
        cost = view.submission_cost(request) if hasattr(view, "submission_cost") else 1
        try:
            count = cache.incr(key, cost)
        except ValueError:  # first request of the window (or the key just expired)
            count = cost if cache.add(key, cost, timeout=window_s + 1) else cache.incr(key, cost)
        if count <= limit:
            return True
        self.retry_after_s = (window + 1) * window_s - now
        return False

    def wait(self) -> float | None:
        """Seconds until the next window opens (shown as ``retry_after`` and ``Retry-After``)."""
        return self.retry_after_s
