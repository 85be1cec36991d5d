"""``POST /api/v1/jobs/`` outside DRF's request cycle, for the submissions it can answer exactly as
DRF would; every other request goes to DRF's view, unchanged.

Why: a submission's CPU was mostly DRF's cycle around the insert (issue 16): a ``Request`` wrapper,
content negotiation, authentication and permission classes, the serializer's ``fields`` copied
and bound per request, its ``to_internal_value`` walk and error plumbing. This path reads the
same inputs with the same code where it matters and skips the machinery:

- **What it takes**: a JSON body (``Content-Type: application/json``, no lone-surrogate escape)
  holding a JSON object of known writable fields, no ``gpu_types`` (their check reads the
  database), ``Authorization: Token <key>`` of an active tenant member, ``Accept`` absent,
  ``*/*`` or ``application/json``, no query string, and a well-formed ``Idempotency-Key`` if
  any. Each field is checked by the serializer's own field object
  (:class:`cluster.serializers.JobSerializer`, bound once per process), then against the same
  cluster facts, command split and memory model as the serializer's ``validate_*`` methods.
  A request it does not take, for any reason, is handed to DRF before anything was written or
  counted, so every 400/401/403/413/415 is DRF's own answer, with its messages.
- **What it then does, as** ``JobViewSet.create`` **does**: the throttle's counter
  (:class:`cluster.throttles.SubmissionThrottle`; 429), the pending cap (429), ``Job.submit``
  (idempotency; 422 on a conflict), the answer of :func:`cluster.views.submission_answer`, and
  errors through :func:`cluster.exceptions.api_exception_handler` (503 for an outage). Its
  responses are DRF ``Response`` objects rendered by the API's renderer with the headers DRF's
  view adds (``Allow``), so body, status and headers are DRF's.

``SHAREWISE_FAST_SUBMIT`` (default on) set to false sends every submission through DRF.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import Throttled
from rest_framework.exceptions import ValidationError as DRFValidationError
from rest_framework.fields import Field, SkipField
from rest_framework.response import Response

from agent.messages import MessageError, split_command
from cluster import cluster_facts, token_cache
from cluster.cache_reads import read_together
from cluster.exceptions import api_exception_handler
from cluster.models import IdempotencyConflict, Job, Membership, Tenant
from cluster.parsers import SURROGATE_ESCAPE, unique_keys
from cluster.renderers import SafeJSONRenderer
from cluster.serializers import JobSerializer, memory_refusal
from cluster.throttles import SubmissionThrottle
from cluster.views import idempotency_key, pending_cap_reached, submission_answer
from cluster.visibility import Viewer
from scheduling.service import OUTAGE_ERRORS

#: ``Allow`` of DRF's job list view (list and create), which every answer of that URL carries.
ALLOW = "GET, POST, HEAD, OPTIONS"
#: ``Content-Type`` values taken (DRF's parser takes more; those go to DRF).
JSON_TYPES = frozenset({"application/json", "application/json; charset=utf-8"})
#: ``Accept`` values answered here (one JSON renderer; others, e.g. with ``indent=``, go to DRF).
ACCEPTED = frozenset({"", "*/*", "application/json"})
RENDERER = SafeJSONRenderer()


@dataclass(frozen=True, slots=True)
class Submission:
    """A request this path answers: the caller, its tenant, the validated fields (as
    ``JobSerializer.validated_data`` would hold them) and the idempotency key."""

    user: Any
    tenant: Tenant
    fields: dict[str, Any]
    key: str | None


@cache
def writable_fields() -> dict[str, Field]:
    """The serializer's writable fields, bound once (declared order): ``run_validation`` of a
    field reads only the field's own settings and validators, never the serializer's context."""
    return {name: field for name, field in JobSerializer().fields.items() if not field.read_only}


@cache
def required_fields() -> frozenset[str]:
    """Names of the fields a submission must have."""
    return frozenset(name for name, field in writable_fields().items() if field.required)


def validated(data: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any] | None:
    """The validated fields of the JSON object ``data`` against the cluster ``facts``
    (:func:`cluster.cluster_facts.current`), equal to what ``JobSerializer(data=data)`` would
    accept, or ``None`` when that serializer would refuse it or this path does not check it
    (``gpu_types``): the caller then hands the request to DRF."""
    fields = writable_fields()
    if not data.keys() <= fields.keys() or not required_fields() <= data.keys() or data.get("gpu_types"):
        return None
    attrs: dict[str, Any] = {}
    for name, field in fields.items():  # declared order, as the serializer builds validated_data
        if name not in data:
            continue
        try:
            attrs[name] = field.run_validation(data[name])
        except (DRFValidationError, DjangoValidationError, SkipField):
            return None
    if "gpu_types" in attrs:  # an empty list: validate_gpu_types keeps it as a new list
        attrs["gpu_types"] = list(attrs["gpu_types"])
    largest = facts["largest_gang"]
    if largest == 0 or attrs["gpus"] > largest:  # JobSerializer.validate_gpus
        return None
    if attrs.get("command"):  # JobSerializer.validate_command
        try:
            split_command(attrs["command"])
        except MessageError:
            return None
    elif facts["missing_command_refusal"] is not None:  # JobSerializer.validate
        return None
    largest_mb = facts["largest_gpu_memory_mb:"]
    if largest_mb != 0 and memory_refusal(attrs, largest_mb, []) is not None:
        return None
    return attrs


def submission_of(request: HttpRequest) -> Submission | None:
    """The :class:`Submission` of ``request``, or ``None`` for one DRF must answer. Reads the
    token and the cluster facts (the cache, both in one round trip, or the database on a miss);
    writes nothing but the cache entries a miss fills."""
    meta = request.META
    if (
        meta.get("CONTENT_TYPE") not in JSON_TYPES
        or meta.get("HTTP_ACCEPT", "") not in ACCEPTED
        or meta.get("QUERY_STRING")  # DRF reads ?format= for its renderer
    ):
        return None
    header = meta.get("HTTP_AUTHORIZATION", "")
    parts = header.split()  # ASCII only: then str.split() splits where DRF's bytes.split() does
    if not header.isascii() or len(parts) != 2 or parts[0].lower() != "token":
        return None
    try:
        key = idempotency_key(request)
        raw = request.body
    except (DRFValidationError, RequestDataTooBig):
        return None
    try:
        text = raw.decode("utf-8")
        data = json.loads(text, parse_constant=refuse_constant, object_pairs_hook=unique_keys)
    except (ValueError, RecursionError):  # so are UnicodeDecodeError, JSONDecodeError, DuplicateKey
        return None
    if not isinstance(data, dict) or SURROGATE_ESCAPE.search(text):
        return None
    # the token's row and the cluster's facts in one cache round trip (each reader keeps its rules)
    get = read_together([token_cache.cache_key(parts[1]), cluster_facts.cache_key()])
    token = token_cache.find_token(parts[1], get)
    if token is None or not token.user.is_active:
        return None
    try:
        tenant = token.user.membership.tenant
    except Membership.DoesNotExist:
        return None
    fields = validated(data, cluster_facts.current(get))
    if fields is None:
        return None
    return Submission(token.user, tenant, fields, key)


def refuse_constant(name: str) -> None:
    """``json.loads`` hook: NaN and ±Infinity are not JSON (the API's parser refuses them too)."""
    raise ValueError(name)


def submit(request: HttpRequest, submission: Submission) -> Response:
    """Count, cap, insert and answer ``submission`` as ``JobViewSet.create`` does after its
    validation; a refusal (429, 422) or an outage (503) is the API's error body."""
    request.user = submission.user  # as DRF's authentication sets it on the Django request
    try:
        throttle = SubmissionThrottle()
        if not throttle.allow_request(request, None):
            raise Throttled(throttle.wait())
        full = pending_cap_reached(submission.tenant, submission.key)
        if full is not None:
            return full
        try:
            job, created = Job.submit(submission.tenant, submission.user, submission.fields, submission.key)
        except IdempotencyConflict as exc:
            return Response({"error": str(exc)}, status=422)
        viewer = Viewer(submission.tenant.pk, submission.tenant.name)
        return submission_answer(job, created, request.path, viewer)
    except Exception as exc:  # what DRF's handle_exception answers; anything else stays a 500
        answer = api_exception_handler(exc, {"request": request, "view": None})
        if answer is None:
            raise
        return answer


def rendered(response: Response) -> Response:
    """``response`` as DRF's ``finalize_response`` leaves it: the API's JSON renderer and the
    view's ``Allow`` header (Django renders it on the way out)."""
    response.accepted_renderer = RENDERER
    response.accepted_media_type = RENDERER.media_type
    response.renderer_context = {}
    response["Allow"] = ALLOW
    return response


def list_or_submit(drf_view: Any) -> Any:
    """The view of ``/api/v1/jobs/``: a submission this module can answer is answered here, every
    other request by ``drf_view`` (the router's list/create view)."""

    @csrf_exempt
    def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "POST" and settings.SHAREWISE_FAST_SUBMIT:
            try:
                submission = submission_of(request)
            except OUTAGE_ERRORS:  # DRF's view meets the same outage and answers 503
                submission = None
            if submission is not None:
                return rendered(submit(request, submission))
        return drf_view(request, *args, **kwargs)  # type: ignore[no-any-return]

    return view
