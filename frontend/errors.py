"""The dashboard's JSON endpoints answer every error as JSON, ``{"error": "..."}``
(docs/DASHBOARD.md): also a method other than GET (Django's ``require_GET`` answers an empty
``text/html`` 405) and a failed CSRF check (Django's HTML 403 page). Pages keep Django's own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.csrf import csrf_failure as django_csrf_failure

from cluster.renderers import compact_json


def error(message: str, status: int) -> JsonResponse:
    """``{"error": message}`` with HTTP ``status``."""
    return compact_json({"error": message}, status=status)


def get_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A JSON view that answers only GET: any other method is ``405 {"error": "method POST not
    allowed: use GET"}`` with ``Allow: GET`` (RFC 9110 §15.5.6), as Django's ``require_GET``
    but in JSON."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "GET":
            response = error(f"method {str(request.method)[:20]} not allowed: use GET", 405)
            response.headers["Allow"] = "GET"
            return response
        return view(request, *args, **kwargs)

    return wrapped


def is_json_route(request: HttpRequest) -> bool:
    """Whether ``request`` was routed to a dashboard JSON path (under ``/dashboard/api/``)."""
    # the endpoints and the JSON 404 of any other path there (frontend/urls.py); the mount point
    # is the page's own URL, wherever config/urls.py puts it
    return request.path.startswith(reverse("frontend:dashboard") + "api/")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``settings.CSRF_FAILURE_VIEW``: ``403 {"error": "CSRF check failed: <Django's reason>"}``
    for a dashboard JSON path, Django's own page (``django.views.csrf.csrf_failure``) otherwise."""
    if is_json_route(request):
        return error(f"CSRF check failed: {reason}", 403)
    return django_csrf_failure(request, reason)
