"""Who may read ``/metrics`` (tenant names, jobs and GPUs per tenant, nodes): a scraper sending
``Authorization: Bearer <SHAREWISE_METRICS_TOKEN>``, or one connecting straight (no proxy header)
from an address of ``SHAREWISE_METRICS_ALLOW`` (addresses or CIDR networks; default loopback)."""

from __future__ import annotations

import ipaddress
import secrets

from django.conf import settings
from django.http import HttpRequest

#: Headers a reverse proxy adds: such a request's REMOTE_ADDR is the proxy's, not the client's.
PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")


def metrics_allowed(request: HttpRequest) -> bool:
    """Whether ``request`` may read the metrics (token first, then the address allow-list)."""
    token = str(settings.SHAREWISE_METRICS_TOKEN or "")
    sent = request.headers.get("Authorization", "")
    if token and sent.startswith("Bearer ") and secrets.compare_digest(sent[7:].encode(), token.encode()):
        return True
    if any(request.META.get(h) for h in PROXY_HEADERS):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    for allowed in settings.SHAREWISE_METRICS_ALLOW:
        try:
            if address in ipaddress.ip_network(allowed, strict=False):
                return True
        except ValueError:  # a malformed entry allows nothing
            continue
    return False
