"""What can go wrong, as exceptions that carry the CLI's exit code.

Every error the client raises is a :class:`SharewiseError`; ``str()`` is one line meant for a
person, ``exit_code`` what the ``sharewise`` command exits with (README, "Exit codes"):

====  =====================  ==============================================================
code  exception              when
====  =====================  ==============================================================
0     —                      success
1     :class:`ServiceError`  the service is unreachable, answered 5xx or something unreadable
2     :class:`UsageError`    a bad command line, a missing setting, an unreadable job file,
                             an API URL that is not the service's (a 404 without its error,
                             or a 404 of ``tenant/``, which the service always has; a 400
                             refusing the URL's host, not in the server's ``ALLOWED_HOSTS``)
3     :class:`NotFound`      404: no such job in your tenant
4     :class:`Rejected`      400, 409, 413, 415, 422: the service refused the request as given
5     :class:`AuthError`     401, 403: no token, a wrong token, or not a member of a tenant
6     :class:`Throttled`     429 after the waits allowed: too many submissions
7     :class:`JobEnded`      ``watch ID`` saw the job end without succeeding
====  =====================  ==============================================================
"""

from __future__ import annotations

from typing import Any


class SharewiseError(Exception):
    """Base of every client error; ``exit_code`` is the CLI's status for it."""

    exit_code = 1


class ServiceError(SharewiseError):
    """The service could not be reached, or answered with a server error (5xx) or an unreadable body.

    ``status``: the HTTP status, ``None`` when no answer came."""

    exit_code = 1

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class UsageError(SharewiseError):
    """The command line, the settings or a job file is wrong; nothing was sent, or (an API URL
    that is not the service's) nothing reached the service."""

    exit_code = 2


class ApiError(SharewiseError):
    """The service answered with a 4xx: ``status``, its ``error`` message and, for validation
    errors, ``fields`` (field name → messages)."""

    exit_code = 4

    def __init__(self, status: int, message: str, fields: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.fields = fields or {}


class NotFound(ApiError):
    """404: no such job (or path) in the caller's tenant."""

    exit_code = 3


class Rejected(ApiError):
    """The request was refused as given (400 invalid input, 409 conflict, 413, 415, 422)."""

    exit_code = 4


class AuthError(ApiError):
    """401 or 403: no token, a wrong one, or an account that belongs to no tenant."""

    exit_code = 5


class Throttled(ApiError):
    """429 and still throttled after the waits the client allows; ``retry_after_s`` says when to retry."""

    exit_code = 6

    def __init__(self, status: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(status, message)
        self.retry_after_s = retry_after_s


class JobEnded(SharewiseError):
    """A watched job ended without succeeding (failed or cancelled)."""

    exit_code = 7


#: How the API's ``error`` of a 400 begins when it comes with ``fields`` (``cluster/exceptions.py``).
INVALID_INPUT = "invalid input: "


def first_message(value: Any) -> str:
    """The first message of one entry of ``fields``: a list of messages, a nested object
    (``{"gpus": ["..."]}`` → ``"gpus: ..."``) or a list of them (``[{}, {"job_id": [...]}]``)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            return f"{key}: {first_message(inner)}"
        return "invalid"
    if isinstance(value, list):
        return next((first_message(v) for v in value if v not in ({}, [], None, "")), "invalid")
    return str(value)


def fields_message(fields: dict[str, Any]) -> str:
    """Every field of a 400's ``fields`` on one line, fields with the same message together, in the
    API's order: ``"model, batch_size: This field is required.; gpus: at most 8 GPUs ..."``. The
    API's ``error`` names only the first field."""
    by_message: dict[str, list[str]] = {}
    for name, value in fields.items():
        by_message.setdefault(first_message(value), []).append(str(name))
    return "; ".join(f"{', '.join(names)}: {message}" for message, names in by_message.items())


def is_error_body(body: Any) -> bool:
    """Whether ``body`` has the API's error shape, ``{"error": "<message>", ...}``."""
    return isinstance(body, dict) and isinstance(body.get("error"), str)


def error_for(status: int, body: Any) -> ApiError:
    """The exception for a 4xx answer with JSON ``body`` (``{"error": ..., "fields": ...}``, the
    API's error shape; anything else is quoted, on one line)."""
    if is_error_body(body):
        message = body["error"]
        # "items": a bulk submission's invalid jobs by index, shaped as fields are
        fields = next((body[k] for k in ("fields", "items") if isinstance(body.get(k), dict)), None)
        if (
            message.startswith(INVALID_INPUT)
            and isinstance(body.get("fields"), dict)
            and len(body["fields"]) > 1
        ):
            message = INVALID_INPUT + fields_message(body["fields"])
    else:
        message = f"HTTP {status}: {' '.join(str(body).split())[:200]}"  # an HTML page: one line
        fields = None
    if status == 404:
        return NotFound(status, message)
    if status in (401, 403):
        return AuthError(status, message)
    if status == 429:
        retry = body.get("retry_after") if isinstance(body, dict) else None
        return Throttled(status, message, float(retry) if isinstance(retry, int | float) else None)
    return Rejected(status, message, fields)
