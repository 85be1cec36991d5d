"""A job's history and output: ``GET /api/v1/jobs/{id}/events/`` and ``GET /api/v1/jobs/{id}/logs/``
for the job's tenant, and ``POST /api/v1/agent/jobs/{id}/logs/`` for the agents that run it.

Tenant scoping is the jobs API's: another tenant's job is 404. A log read may wait for new output
(long poll, ``?wait=S`` up to ``SHAREWISE_LOG_WAIT_MAX_S``), so ``sharewise logs --follow`` costs
one request per burst of output rather than one per second.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import generics, permissions, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from cluster.agent_serializers import agent_errors
from cluster.authentication import NodeTokenAuthentication
from cluster.job_serializers import AgentLogSerializer, JobEventSerializer, LogPieceSerializer
from cluster.joblogs import OutputRefused, append_output, read_output
from cluster.models import Job, JobEvent
from cluster.permissions import IsNodeAgent, IsTenantMember, tenant_of
from cluster.query_params import (
    DECIMAL_WORDS,
    WHOLE,
    decimal_number,
    number_too_long,
    single_or_400,
    whole_number,
)
from cluster.visibility import JobNames, Viewer

#: Seconds between two looks at the database while a log read waits for output **(ours)**.
LOG_POLL_S = 0.5

Error = inline_serializer("JobError", {"error": serializers.CharField()})


def tenant_job(request: Request, job_id: int) -> Job:
    """The caller's tenant's job ``job_id``; 404 (``Http404``) for any other."""
    return get_object_or_404(Job, pk=job_id, tenant=tenant_of(request))


class JobEventsView(generics.ListAPIView):
    """The job's history, oldest first: submitted, placed (GPUs, sub-batch), started, progress,
    preempted, requeued, succeeded, failed, cancelled; paginated like the job list."""

    serializer_class = JobEventSerializer
    permission_classes = [permissions.IsAuthenticated, IsTenantMember]

    def get_queryset(self) -> QuerySet[JobEvent]:
        job = tenant_job(self.request, int(self.kwargs["job_id"]))
        return JobEvent.objects.filter(job=job).order_by("at", "id")

    def paginate_queryset(self, queryset: Any) -> list[JobEvent] | None:
        """The page, each event's message redacted for the caller (other tenants' jobs unnamed)."""
        page = super().paginate_queryset(queryset)
        events = page if page is not None else list(queryset)
        tenant = tenant_of(self.request)
        assert tenant is not None  # IsTenantMember
        messages = JobNames().redact([e.message for e in events], Viewer(tenant.pk, tenant.name))
        for event, message in zip(events, messages, strict=True):
            event.message = message
        return page

    @extend_schema(responses={200: JobEventSerializer(many=True), 401: Error, 403: Error, 404: Error})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


def wait_limit_s() -> float:
    """The longest a log read may wait for output (s; setting ``SHAREWISE_LOG_WAIT_MAX_S``)."""
    return float(settings.SHAREWISE_LOG_WAIT_MAX_S)


def int_param(request: Request, name: str, default: int) -> int:
    """Query parameter ``name`` as an integer (absolute value below 2⁶³); 400 naming it when it is
    not one, is too long (:func:`~cluster.query_params.number_too_long`) or is given twice."""
    text = single_or_400(request.query_params, name)
    if text is None:
        return default
    too_long = number_too_long(text)
    if too_long is not None:
        raise ValidationError({name: [too_long]})
    value = whole_number(text, signed=True)  # ASCII digits only (cluster.query_params)
    if value is None:
        # an integer beyond the bound is one: say what is wrong with it
        what = "an integer of absolute value below 2^63" if WHOLE.fullmatch(text) else "an integer"
        raise ValidationError({name: [f"must be {what}, got {text[:40]!r}"]})
    return value


def float_param(request: Request, name: str, default: float, low: float, high: float) -> float:
    """Query parameter ``name`` as a number clamped to ``[low, high]`` (``0.5``, ``.5``, ``5.``,
    ``1e-3``; leading zeros allowed); 400 when it is not one, is too long
    (:func:`~cluster.query_params.number_too_long`) or is given twice."""
    text = single_or_400(request.query_params, name)
    if text is None:
        return default
    too_long = number_too_long(text)
    if too_long is not None:
        raise ValidationError({name: [too_long]})
    value = decimal_number(text)  # ASCII digits only, finite (cluster.query_params)
    if value is None:
        # decimal_number takes no sign: "-1" is refused as a negative, not as "not a number"
        # "ASCII digits (0-9)" was said, yet 1.5 and 1e308 are taken: say what is
        raise ValidationError({name: [f"must be a number of 0 or more {DECIMAL_WORDS}, got {text[:40]!r}"]})
    return min(high, max(low, value))


class JobLogsView(generics.GenericAPIView):
    """The job's output (stdout and stderr, as its agents captured it), by character offset."""

    serializer_class = LogPieceSerializer
    permission_classes = [permissions.IsAuthenticated, IsTenantMember]

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "offset",
                OpenApiTypes.INT,
                description="First character to return (0: the start; negative: that many before the end).",
            ),
            OpenApiParameter(
                "wait",
                OpenApiTypes.NUMBER,
                description="Seconds to wait for output past offset while the job may still write "
                "(long poll; a larger value, 1e308 say, waits SHAREWISE_LOG_WAIT_MAX_S). 0: answer at once.",
            ),
        ],
        responses={200: LogPieceSerializer, 400: Error, 401: Error, 403: Error, 404: Error},
    )
    def get(self, request: Request, job_id: str) -> Response:
        job = tenant_job(request, int(job_id))
        offset = int_param(request, "offset", 0)
        wait = float_param(request, "wait", 0.0, 0.0, wait_limit_s())
        deadline = time.monotonic() + wait
        while True:
            piece = read_output(job, offset)
            if piece.data or piece.complete or time.monotonic() >= deadline:
                break
            time.sleep(min(LOG_POLL_S, max(0.0, deadline - time.monotonic())))
            job.refresh_from_db(fields=["status", "finished_at"])
        body = {"job_id": job.pk, "status": job.status, **LogPieceSerializer(piece).data}
        return Response(body)


AgentLogAnswer = inline_serializer("AgentLogAnswer", {"received": serializers.IntegerField()})


class AgentJobLogView(generics.GenericAPIView):
    """A node agent sends a chunk of a job's output (docs/AGENT.md §2a); ``Authorization: Node``."""

    serializer_class = AgentLogSerializer
    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]
    throttle_classes: list[Any] = []

    @extend_schema(
        responses={
            200: AgentLogAnswer,
            **agent_errors(400, 401, 403, 404),
        }
    )
    def post(self, request: Request, job_id: str) -> Response:
        job_pk = int(job_id)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        node = request.auth
        try:
            received = append_output(job_pk, node, data["run"], data["offset"], data["data"], data["eof"])
        except OutputRefused as exc:
            return Response({"error": str(exc)}, status=exc.status)
        return Response({"received": received})
