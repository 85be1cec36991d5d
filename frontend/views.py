"""Dashboard pages and the JSON endpoints they poll.

Pages need a Django login (session); the JSON endpoints answer ``401 {"error": …}`` to an
anonymous caller, ``403`` to a user who is neither staff nor a member of a tenant, and ``400``
for a bad query parameter. Scoping (admin: whole cluster; member: own tenant) is decided once
per request by :func:`frontend.payloads.common.viewer_of` and applied by every payload function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from cluster.query_params import number_too_long, single, whole_number
from frontend.errors import error, get_only
from frontend.payloads import cluster_map, decisions, fairness, learning, memo, queue, quota_windows, timeline
from frontend.payloads.clock import time_scale
from frontend.payloads.common import viewer_of

#: How often the page polls each endpoint (ms) unless ``?poll=`` says otherwise.
DEFAULT_POLL_MS = 2000

#: Endpoints: URL name → (payload function, query parameter, default, lowest, highest).
Endpoint = tuple[Callable[..., Mapping[str, Any]], str | None, int, int, int]
ENDPOINTS: dict[str, Endpoint] = {
    "cluster-map": (cluster_map.cluster_map_payload, None, 0, 0, 0),
    "timeline": (timeline.timeline_payload, "window", 3600, 60, 7 * 86400),
    "decisions": (decisions.decisions_payload, "rounds", 10, 1, 100),
    "fairness": (fairness.fairness_payload, "window", 3600, 300, 7 * 86400),
    "queue": (queue.queue_payload, "limit", 100, 1, 1000),
    "quota": (quota_windows.quota_windows_payload, None, 0, 0, 0),
    "learning": (learning.learning_payload, "window", 3600, 300, 7 * 86400),
}

#: The page's window control: seconds (of trace time during a replay) → words. Every value is
#: within the bounds of every ``window`` endpoint above.
WINDOW_CHOICES: dict[int, str] = {
    300: "5 min",
    900: "15 min",
    3600: "1 h",
    6 * 3600: "6 h",
    86400: "1 day",
    7 * 86400: "7 days",
}
#: The window the page starts with: the endpoints' default, or during a replay one day of trace
#: time (the whole of the demo's trace: the window begins where the replay began).
DEFAULT_WINDOW_S, DEFAULT_REPLAY_WINDOW_S = 3600, 86400

#: Plotly draws with inline styles; every script, image, font and request stays on this origin.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; font-src 'self' data:; frame-ancestors 'none'; base-uri 'self'; form-action 'self'"
)


def _int_param(request: HttpRequest, name: str, default: int, lo: int, hi: int) -> int:
    """``request.GET[name]`` as an integer in ``[lo, hi]`` (``default`` when absent).

    Raises ``ValueError`` with a readable message otherwise — also for an empty value
    (``?window=``, as the REST API answers ``?limit=``) and when it is given twice
    (:class:`cluster.query_params.RepeatedParameter`).
    """
    raw = single(request.GET, name)
    if raw is None:
        return default
    too_long = number_too_long(raw)
    if too_long is not None:
        raise ValueError(f"{name} {too_long}")
    value = whole_number(raw)  # ASCII digits only: int() also reads "\u0663\u0660\u0660" and " 300"
    if value is None:
        raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {raw[:40]!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be from {lo} to {hi}, got {value}")
    return value


def with_csp(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Add the dashboard's Content-Security-Policy header (:data:`CSP`) to a page."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response.headers["Content-Security-Policy"] = CSP
        return response

    return wrapped


@require_GET
@with_csp
@login_required(login_url="frontend:login")
def dashboard(request: HttpRequest) -> HttpResponse:
    """The dashboard page: cluster map, timeline, sharing decisions, learning, fairness, queue."""
    viewer = viewer_of(request.user)
    if viewer is None:
        return render(request, "frontend/forbidden.html", status=403)
    scale = time_scale()
    default_window = DEFAULT_REPLAY_WINDOW_S if scale.is_trace else DEFAULT_WINDOW_S
    _, _, default_rounds, lo_rounds, hi_rounds = ENDPOINTS["decisions"]
    # the page's own query (?poll=, ?window=, ?rounds=) only sets its controls: a bad value
    # falls back to the default (the endpoints answer 400 for theirs)
    poll_ms = _param_or(request, "poll", DEFAULT_POLL_MS, 500, 60_000)
    window = _param_or(request, "window", default_window, min(WINDOW_CHOICES), max(WINDOW_CHOICES))
    rounds = _param_or(request, "rounds", default_rounds, lo_rounds, hi_rounds)
    context = {
        "viewer": viewer,
        "poll_ms": poll_ms,
        "windows": [(s, words, s == window) for s, words in WINDOW_CHOICES.items()],
        "rounds": rounds,
        "rounds_max": hi_rounds,
        "time_words": (
            f"trace time in seconds (a replay at {scale.speedup:g}x)" if scale.is_trace else "UTC, seconds"
        ),
    }
    return render(request, "frontend/dashboard.html", context)


def _param_or(request: HttpRequest, name: str, default: int, lo: int, hi: int) -> int:
    """:func:`_int_param`, or ``default`` for a bad value."""
    try:
        return _int_param(request, name, default, lo, hi)
    except ValueError:
        return default


@get_only
@never_cache
def endpoint(request: HttpRequest, name: str) -> HttpResponse:
    """One JSON endpoint of :data:`ENDPOINTS` (see :mod:`frontend.payloads` for the body)."""
    if not request.user.is_authenticated:
        return error("log in first (session authentication)", 401)
    viewer = viewer_of(request.user)
    if viewer is None:
        return error("this account is neither a cluster admin nor a member of a tenant", 403)
    payload, param, default, lo, hi = ENDPOINTS[name]
    if param is None:
        return _body(payload(viewer))
    try:
        value = _int_param(request, param, default, lo, hi)
    except ValueError as exc:
        return error(str(exc), 400)
    return _body(payload(viewer, value))


def _body(body: Mapping[str, Any]) -> HttpResponse:
    """``body`` as JSON (:func:`frontend.payloads.memo.dumps`; a body kept from an earlier
    request is written once and reused, :class:`frontend.payloads.memo.KeptBody`)."""
    encoded = body.json() if isinstance(body, memo.KeptBody) else memo.dumps(body)
    return HttpResponse(encoded, content_type="application/json")
