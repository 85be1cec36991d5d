"""One error shape for the whole API: ``{"error": "<message>", ...}`` with a 4xx status.

A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is 413. Deleting a row still referenced (a GPU with
placements) is 409. Validation errors add ``"fields"`` (field name → list of messages); throttling
adds ``"retry_after"`` (s); a 403 :class:`CodedPermissionDenied` adds ``"code"``. The cache, the
broker or the database unreachable is 503 (with ``"retry_after"``). A path that names nothing under
``/api/`` or ``/dashboard/api/`` is ``404 {"error": "not found"}`` (:func:`api_not_found`); a host
``ALLOWED_HOSTS`` does not admit is a 400 naming it and the setting (:func:`api_bad_request`). Anything
else DRF does not handle stays a 500 (and is logged).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError, RestrictedError
from django.http import HttpRequest, JsonResponse
from django.http.request import split_domain_port
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from cluster.renderers import compact_json

log = logging.getLogger(__name__)

#: The body of every 404: an unknown path under ``/api/`` or ``/dashboard/api/``, a missing row.
NOT_FOUND = {"error": "not found"}

#: Seconds a client is asked to wait after a 503 for an unreachable service **(ours)**.
OUTAGE_RETRY_AFTER_S = 5


class CodedPermissionDenied(exceptions.PermissionDenied):
    """A 403 whose body carries, beside ``error``, a machine-readable ``code`` that a client acts
    on (never on the wording): ``{"error": message, "code": code}``."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code)
        self.body = {"error": message, "code": code}


def _first_message(data: Any) -> str:
    """The first human-readable message in a DRF error structure (dict, list or string)."""
    if isinstance(data, dict):
        for key, value in data.items():
            message = _first_message(value)
            return message if key == "non_field_errors" else f"{key}: {message}"
        return "invalid input"
    if isinstance(data, list):
        return _first_message(data[0]) if data else "invalid input"
    return str(data)


def in_use_message(exc: ProtectedError | RestrictedError) -> str:
    """``"still in use, cannot delete: 2 placements (jobs 3, 5) refer to it"`` — what holds the row,
    in words, instead of Django's "referenced through protected foreign keys: 'GPU.node'"."""
    held = list(exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects)
    if not held:
        return "still in use, cannot delete"
    counts = Counter(obj._meta.verbose_name for obj in held)
    plural = {obj._meta.verbose_name: obj._meta.verbose_name_plural for obj in held}
    what = ", ".join(f"{n} {name if n == 1 else plural[name]}" for name, n in counts.items())
    jobs = sorted({obj.job_id for obj in held if getattr(obj, "job_id", None) is not None})
    if jobs:
        shown = ", ".join(map(str, jobs[:5])) + (", ..." if len(jobs) > 5 else "")
        what += f" (job{'s' if len(jobs) > 1 else ''} {shown})"
    return f"still in use, cannot delete: {what} refer{'s' if len(held) == 1 else ''} to it"


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF ``EXCEPTION_HANDLER``: the standard handling, reshaped to ``{"error": ...}``; a service
    this process cannot reach (cache, broker, database: ``scheduling.service.OUTAGE_ERRORS``) is
    503 with ``retry_after`` and ``Retry-After``, never a 500."""
    from scheduling.service import OUTAGE_ERRORS, outage_message

    if isinstance(exc, OUTAGE_ERRORS):
        log.warning("503 for %s: %s", context.get("request") and context["request"].path, exc)
        return Response(
            {"error": outage_message(exc), "retry_after": OUTAGE_RETRY_AFTER_S},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(OUTAGE_RETRY_AFTER_S)},
        )
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.messages)
    elif isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {"error": f"request body larger than {limit} bytes"},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    elif isinstance(exc, ProtectedError | RestrictedError):
        return Response({"error": in_use_message(exc)}, status=status.HTTP_409_CONFLICT)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        response.data = {"error": f"invalid input: {_first_message(fields)}", "fields": fields}
    elif isinstance(exc, CodedPermissionDenied):
        response.data = dict(exc.body)
    elif isinstance(exc, exceptions.APIException):
        body: dict[str, Any] = {"error": _first_message(exc.detail)}
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            body["retry_after"] = round(exc.wait, 3)
        response.data = body
    elif response.status_code == status.HTTP_404_NOT_FOUND:  # Http404: the same body as an unknown path
        response.data = dict(NOT_FOUND)
    else:  # PermissionDenied from Django
        response.data = {"error": _first_message(response.data.get("detail", "error"))}
    return response


@csrf_exempt
def api_not_found(request: HttpRequest) -> JsonResponse:
    """``404 {"error": "not found"}`` (:data:`NOT_FOUND`), any method, for any path that names
    nothing under ``/api/v1/`` (``cluster.urls``) or under ``/dashboard/api/`` (``frontend.urls``):
    a script reading JSON never gets Django's HTML page."""
    return compact_json(NOT_FOUND, status=404)


#: The longest Host header an error message quotes (a DNS name is at most 253 characters, a port 6).
MAX_QUOTED_HOST = 260


def requested_host(request: HttpRequest) -> str:
    """The host a request asked for, as Django's ``get_host`` reads it (``X-Forwarded-Host`` when
    ``USE_X_FORWARDED_HOST`` is on, else ``Host``, else the server's name and port), unchecked."""
    meta = request.META
    if settings.USE_X_FORWARDED_HOST and "HTTP_X_FORWARDED_HOST" in meta:
        return str(meta["HTTP_X_FORWARDED_HOST"])
    if "HTTP_HOST" in meta:
        return str(meta["HTTP_HOST"])
    name, port = str(meta.get("SERVER_NAME", "")), str(request.get_port())
    return name if port == ("443" if request.is_secure() else "80") else f"{name}:{port}"


def disallowed_host_message(request: HttpRequest) -> str:
    """The error of a request whose host ``ALLOWED_HOSTS`` does not admit. The host is quoted only
    when it is a well-formed host name with an optional port (letters, digits, ``.``, ``-``, ``:``,
    ``[]``) of bounded length, so the message never carries what the client chose beyond that."""
    host = requested_host(request)
    domain, port = split_domain_port(host)
    if not domain or len(host) > MAX_QUOTED_HOST:
        return (
            "the request's Host header is not a valid host name; send the server's host name,"
            " one its ALLOWED_HOSTS setting lists"
        )
    return (
        f"host {host!r} is not in this server's ALLOWED_HOSTS setting:"
        f" use a host name it lists, or add {domain!r} to ALLOWED_HOSTS on the server"
    )


@csrf_exempt
def api_bad_request(request: HttpRequest, exception: Exception | None) -> JsonResponse:
    """Django's 400 (a request refused before any view: a host ``ALLOWED_HOSTS`` does not admit,
    another suspicious operation) as the API's JSON error. A disallowed host adds
    ``"code": "disallowed_host"`` so that a client can tell its own configuration is at fault."""
    if isinstance(exception, DisallowedHost):
        body = {"error": disallowed_host_message(request), "code": "disallowed_host"}
    else:
        body = {"error": "bad request"}
    return compact_json(body, status=400)
