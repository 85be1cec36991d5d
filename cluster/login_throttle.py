"""Login throttling of the dashboard and the Django admin with django-axes (a kept library: failed
attempts per client address in the database, lockout answered 429, cleared by a successful login).

Settings (``config/settings.py``): ``SHAREWISE_LOGIN_FAILURE_LIMIT`` failed passwords in a row from
one address lock it out for ``SHAREWISE_LOGIN_LOCKOUT_S`` seconds; ``SHAREWISE_CLIENT_IP_HEADER``
names the header a reverse proxy puts the client's address in. API tokens are not passwords: token
requests never go through ``authenticate()`` and are not counted.
"""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.http import HttpRequest


class AxesRequestBackend(AxesStandaloneBackend):
    """django-axes' backend, for logins that come with a request. A call without one (a management
    command, a script, the test client's ``login()``) has no address to count or lock and is left
    to the next backend, instead of raising as axes does."""

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> Any:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def client_ip(request: HttpRequest) -> str | None:
    """The client's address: the first entry of ``SHAREWISE_CLIENT_IP_HEADER`` when set (the
    client as the proxy saw it), else ``REMOTE_ADDR``."""
    header = settings.SHAREWISE_CLIENT_IP_HEADER
    if header and request.META.get(header):
        return str(request.META[header]).split(",")[0].strip()
    return request.META.get("REMOTE_ADDR")
