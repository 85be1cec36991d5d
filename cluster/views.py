"""REST API views: the tenant API (jobs, own tenant), the admin API, health checks.

Tenant scoping lives in ``get_queryset()``: a tenant's member reaches only the tenant's jobs, so
another tenant's job is a 404, in lists and by id alike. The tenant of a new job comes from the
caller's membership, never from the payload.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import page_not_found
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import generics, mixins, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster import exceptions, runnable
from cluster.agent_serializers import AgentEventSerializer, HeartbeatSerializer, agent_errors
from cluster.api_tokens import ApiToken
from cluster.authentication import NodeTokenAuthentication
from cluster.fields import refuse_fields
from cluster.job_details import describe_jobs
from cluster.models import GPU, IdempotencyConflict, Job, Node, Placement, Quota, Tenant
from cluster.pending_count import pending_jobs
from cluster.permissions import IsNodeAgent, IsTenantMember, tenant_of, token_node_mismatch
from cluster.query_params import single_or_400
from cluster.renderers import compact_json
from cluster.serializers import (
    AdminQuotaSerializer,
    AdminTenantSerializer,
    GPUSerializer,
    IncompatiblePairSerializer,
    JobSerializer,
    LearnedSlowdownSerializer,
    NodeCreateSerializer,
    NodeSerializer,
    TenantSerializer,
)
from cluster.throttles import SubmissionThrottle
from cluster.visibility import Viewer
from scheduling import service
from scheduling.models import IncompatiblePair, LearnedSlowdown

#: A response carrying a secret must not be kept by a cache or a browser.
NO_STORE = {"Cache-Control": "no-store"}
#: Idempotency keys: 1-128 visible ASCII characters (a UUID fits).
MAX_IDEMPOTENCY_KEY = 128

ErrorSerializer = inline_serializer(
    "Error",
    {
        "error": serializers.CharField(),
        "fields": serializers.DictField(required=False),
        "retry_after": serializers.FloatField(required=False),
    },
)
ID_PATTERN = r"[0-9]{1,18}"


def _errors(*codes: int) -> dict[int, OpenApiResponse]:
    """Schema entries for error responses with the ``{"error": ...}`` body."""
    return {code: OpenApiResponse(ErrorSerializer) for code in codes}


def idempotency_key(request: Request) -> str | None:
    """The request's ``Idempotency-Key`` header, or ``None``; raises ``ValidationError`` if malformed."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not all(" " < ch < "\x7f" for ch in key):
        raise ValidationError(
            {"Idempotency-Key": [f"must be 1-{MAX_IDEMPOTENCY_KEY} visible ASCII characters"]}
        )
    return key


def pending_cap_reached(tenant: Tenant, key: str | None) -> Response | None:
    """429 when ``tenant`` already has ``SHAREWISE_MAX_PENDING_PER_TENANT`` pending jobs (a replay
    of an earlier submission's key is still answered); ``None`` otherwise. Far from the cap the
    count may be a second old (:func:`cluster.pending_count.pending_jobs`)."""
    limit = int(settings.SHAREWISE_MAX_PENDING_PER_TENANT)
    if pending_jobs(tenant.pk, limit) < limit:
        return None
    if Job.earlier_submission(tenant, key) is not None:
        return None
    wait = float(settings.SHAREWISE_ROUND_INTERVAL_S)
    return Response(
        {
            "error": f"tenant {tenant.name} already has {limit:,} pending jobs, the most it may have "
            "(SHAREWISE_MAX_PENDING_PER_TENANT); submit again when some have started, or cancel some",
            "retry_after": wait,
        },
        status=status.HTTP_429_TOO_MANY_REQUESTS,
        headers={"Retry-After": str(max(1, round(wait)))},
    )


@cache
def job_shown() -> JobSerializer:
    """One :class:`JobSerializer`, its fields bound once per process, that shows any job:
    ``to_representation(job)`` reads only the job (its fields and method fields keep no state),
    so threads may share it, and no request builds and binds the 30 fields again."""
    return JobSerializer()


def submission_answer(
    job: Job, created: bool, path: str, viewer: Viewer, serializer: JobSerializer | None = None
) -> Response:
    """The answer to a submission that made ``job`` (``created``) or found it by its idempotency
    key: 201 with ``Location`` (``path`` + id) or 200 with ``Idempotent-Replayed``, the job as
    ``serializer`` (:func:`job_shown` when ``None``) shows it. A new job asks for a
    round (debounced, after commit; nothing without a broker)."""
    if created:
        service.request_round()
    job.active_placements = []
    if created:  # a job made now has no samples of its own: skip that query
        job.iteration_estimate = service.job_estimates([job], new=True)[job.pk]
    if job.status == Job.Status.PENDING and created:
        job.pending_reason = service.NOT_YET_CONSIDERED
    elif not created:
        describe_jobs([job], viewer)
    if serializer is None:
        data = job_shown().to_representation(job)
    else:
        serializer.instance = job
        data = serializer.data
    headers = {"Location": f"{path}{job.pk}/"} if created else {"Idempotent-Replayed": "true"}
    return Response(
        data,
        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        headers=headers,
    )


class JobViewSet(
    mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """The caller's tenant's jobs: submit, list (newest first), get, cancel."""

    serializer_class = JobSerializer
    permission_classes = [permissions.IsAuthenticated, IsTenantMember]
    lookup_value_regex = ID_PATTERN

    def get_queryset(self) -> QuerySet[Job]:
        active = (
            Placement.objects.filter(active=True)
            .select_related("gpu__node")
            .order_by("gpu__node__name", "gpu__index")
        )
        jobs = Job.objects.filter(tenant=tenant_of(self.request)).prefetch_related(
            Prefetch("placements", queryset=active, to_attr="active_placements")
        )
        wanted = single_or_400(self.request.query_params, "status") if self.action == "list" else None
        if wanted is not None:
            if wanted not in Job.Status.values:
                raise ValidationError({"status": [f"must be one of {', '.join(Job.Status.values)}"]})
            jobs = jobs.filter(status=wanted)
        return jobs

    def get_throttles(self) -> list[Any]:
        return [SubmissionThrottle()] if self.action == "create" else []

    def viewer(self) -> Viewer:
        """The caller as the redaction of other tenants' jobs sees them (a member of one tenant)."""
        tenant = tenant_of(self.request)
        assert tenant is not None  # IsTenantMember
        return Viewer(tenant.pk, tenant.name)

    def paginate_queryset(self, queryset: Any) -> list[Job] | None:
        """One page of jobs, each with the iteration time the scheduler uses (2 queries a page),
        its pending reason, estimated start and GPU partners (3 more)."""
        page = super().paginate_queryset(queryset)
        if page:
            estimates = service.job_estimates(page)
            for job in page:
                job.iteration_estimate = estimates[job.pk]
            describe_jobs(page, self.viewer())
        return page

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "status", OpenApiTypes.STR, enum=Job.Status.values, description="Only jobs in this status."
            )
        ],
        responses={200: JobSerializer(many=True), **_errors(400, 401, 403)},
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(responses={200: JobSerializer, **_errors(401, 403, 404)})
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        job = self.get_object()
        describe_jobs([job], self.viewer())
        return Response(self.get_serializer(job).data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                {"type": "string", "minLength": 1, "maxLength": MAX_IDEMPOTENCY_KEY, "pattern": "^[!-~]+$"},
                OpenApiParameter.HEADER,
                description="Same key and body: the same job (200). Same key, other body: 422.",
            )
        ],
        responses={
            201: JobSerializer,
            200: OpenApiResponse(JobSerializer, description="Replay of an earlier submission with this key."),
            **_errors(400, 401, 403, 413, 415, 422, 429),
        },
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = idempotency_key(request)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        full = pending_cap_reached(tenant_of(request), key)
        if full is not None:
            return full
        try:
            job, created = Job.submit(tenant_of(request), request.user, serializer.validated_data, key)
        except IdempotencyConflict as exc:
            return Response({"error": str(exc)}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
        # answer with the same serializer: its fields are built once
        return submission_answer(job, created, request.path, self.viewer(), serializer)

    @extend_schema(request=None, responses={200: JobSerializer, **_errors(400, 401, 403, 404, 409)})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel a pending or running job (repeating it is harmless); a finished job gives 409."""
        refuse_fields(request.data)
        job = self.get_object()
        if (
            not service.cancel_job(job, by=f"cancelled by {request.user.get_username()}")
            and job.status != Job.Status.CANCELLED
        ):
            return Response({"error": f"job {job.pk} already {job.status}"}, status=status.HTTP_409_CONFLICT)
        job.active_placements = []
        return Response(self.get_serializer(job).data)


#: The schema lists windows in seconds; a unit (``2h``) is accepted too (``service.parse_windows``).
WINDOWS_PARAMETER = OpenApiParameter(
    "windows",
    {
        "type": "array",
        "items": {"type": "integer", "minimum": service.MIN_WINDOW_S, "maximum": service.MAX_WINDOW_S},
        "maxItems": service.MAX_WINDOWS,
    },
    style="form",
    explode=False,
    description="Windows ending now for GPU-hours, comma-separated: 7200,86400 (the default) or "
    "2h,24h; 1-4 whole numbers with an optional unit s, m, h or d, each 60 s to 7 days.",
)


def windows_of(request: Request) -> tuple[int, ...]:
    """The ``windows`` query parameter (s; :func:`scheduling.service.parse_windows`); a bad one
    is a 400 naming it (also one given twice)."""
    try:
        return service.parse_windows(single_or_400(request.query_params, "windows"))
    except ValueError as exc:
        raise ValidationError({"windows": [str(exc)]}) from None


class TenantView(generics.RetrieveAPIView):
    """The caller's tenant: quotas and usage (over quota, GPU-hours over ``?windows=``)."""

    serializer_class = TenantSerializer
    permission_classes = [permissions.IsAuthenticated, IsTenantMember]

    def get_object(self) -> Tenant:
        return tenant_of(self.request)

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "windows": windows_of(self.request)}

    @extend_schema(parameters=[WINDOWS_PARAMETER], responses={200: TenantSerializer, **_errors(400)})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


TokenAnswer = inline_serializer(
    "ApiTokenIssued",
    {
        "token": serializers.CharField(help_text="Send as 'Authorization: Token <token>'; shown only now."),
        "created_at": serializers.DateTimeField(),
    },
)


class TenantTokenView(APIView):
    """The caller's own API token: ``POST`` replaces it with a new one, shown once in the answer;
    the old token stops working at once (only the new one's SHA-256 is kept)."""

    permission_classes = [permissions.IsAuthenticated, IsTenantMember]

    @extend_schema(request=None, responses={201: TokenAnswer, **_errors(400, 401, 403)})
    def post(self, request: Request) -> Response:
        refuse_fields(request.data)  # {"x": 1} was taken, and the token rotated
        token, raw = ApiToken.issue(request.user)
        return Response(
            {"token": raw, "created_at": token.created_at}, status=status.HTTP_201_CREATED, headers=NO_STORE
        )


class AdminTenantViewSet(viewsets.ModelViewSet):
    """Admins: create, list, rename and delete tenants."""

    queryset = Tenant.objects.prefetch_related("quotas")
    serializer_class = AdminTenantSerializer
    permission_classes = [permissions.IsAdminUser]
    lookup_value_regex = ID_PATTERN
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    @extend_schema(responses={204: None, **_errors(401, 403, 404, 409)})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete a tenant with its quotas, finished jobs and its members' accounts and API tokens
        (staff accounts only lose the membership), so the name can be created again.

        409 while the tenant has pending or running jobs: agents would never hear of their end.
        """
        tenant = self.get_object()
        with transaction.atomic():
            active = list(
                tenant.jobs.filter(status__in=Job.ACTIVE_STATUSES)
                .order_by("pk")
                .values_list("pk", flat=True)[:6]
            )
            if active:
                shown = ", ".join(map(str, active[:5])) + (", ..." if len(active) > 5 else "")
                return Response(
                    {
                        "error": f"tenant {tenant.name} still has pending or running jobs ({shown}); "
                        "cancel them and wait until they stop before deleting the tenant"
                    },
                    status=status.HTTP_409_CONFLICT,
                )
            get_user_model().objects.filter(
                membership__tenant=tenant, is_staff=False, is_superuser=False
            ).delete()
            tenant.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class AdminQuotaViewSet(viewsets.ModelViewSet):
    """Admins: tenants' quotas."""

    queryset = Quota.objects.select_related("tenant").order_by("tenant__name", "gpu_type")
    serializer_class = AdminQuotaSerializer
    permission_classes = [permissions.IsAdminUser]
    lookup_value_regex = ID_PATTERN
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]


class AdminNodeViewSet(viewsets.ModelViewSet):
    """Admins: register nodes (the response shows the agent token once), drain or delete them."""

    queryset = Node.objects.prefetch_related(Prefetch("gpus", queryset=GPU.objects.select_related("node")))
    permission_classes = [permissions.IsAdminUser]
    lookup_value_regex = ID_PATTERN
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        return NodeCreateSerializer if self.action == "create" else NodeSerializer

    @extend_schema(responses={204: None, **_errors(401, 403, 404, 409)})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete a node with its GPUs and their placement history (the jobs keep their own
        records and events); 409 while a job holds one of its GPUs: drain it and wait.

        The history goes with the node because each placement row names its GPU; the jobs'
        generations stay above what any remaining agent applied (each node's rows carry its own).
        """
        node = self.get_object()
        with transaction.atomic():
            busy = sorted(
                set(
                    Placement.objects.filter(gpu__node=node, active=True).values_list("job_id", flat=True)[:6]
                )
            )
            if busy:
                shown = ", ".join(map(str, busy[:5])) + (", ..." if len(busy) > 5 else "")
                return Response(
                    {
                        "error": f"node {node.name} still runs jobs ({shown}); drain it (status draining) "
                        "and wait until they stop before deleting it"
                    },
                    status=status.HTTP_409_CONFLICT,
                )
            Placement.objects.filter(gpu__node=node, active=False).delete()
            node.delete()  # a round placing on it meanwhile makes this a ProtectedError: 409
        return Response(status=status.HTTP_204_NO_CONTENT)


class AdminSlowdownView(generics.ListAPIView):
    """Admins: the learned co-location slowdowns, with their samples, prior and posterior."""

    queryset = LearnedSlowdown.objects.filter(count__gt=0)
    serializer_class = LearnedSlowdownSerializer
    permission_classes = [permissions.IsAdminUser]


class AdminIncompatiblePairView(generics.ListAPIView):
    """Admins: the pairs that ran out of memory together, newest first."""

    queryset = IncompatiblePair.objects.all()
    serializer_class = IncompatiblePairSerializer
    permission_classes = [permissions.IsAdminUser]


class AdminGPUViewSet(mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Admins: list GPUs and mark them healthy or not."""

    queryset = GPU.objects.select_related("node")
    serializer_class = GPUSerializer
    permission_classes = [permissions.IsAdminUser]
    lookup_value_regex = ID_PATTERN
    http_method_names = ["get", "patch", "head", "options"]


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's ``handler404``: the API's JSON 404 for paths under ``/api/``, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return exceptions.api_not_found(request)
    return page_not_found(request, exception or Http404())


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's ``handler400`` (a host ``ALLOWED_HOSTS`` does not admit, say): the API's JSON error
    for paths under ``/api/`` and ``/dashboard/api/``, Django's page elsewhere."""
    if request.path.startswith(("/api/", "/dashboard/api/")):
        return exceptions.api_bad_request(request, exception)
    return django_bad_request(request, exception or Exception())


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process answers."""
    return compact_json({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: the database answers, and so do the shared cache and the broker when they are
    configured (:func:`scheduling.service.readiness`); 503 with the reason otherwise."""
    ready, body = service.readiness()
    return compact_json(body, status=200 if ready else 503)


# ------------------------------------------------------------------ node agents (docs/AGENT.md)

AgentAnswer = inline_serializer(
    "AgentEventAnswer",
    {
        "job_id": serializers.IntegerField(),
        "status": serializers.CharField(),
        "accepted": serializers.BooleanField(),
    },
)
HeartbeatAnswer = inline_serializer(
    "HeartbeatAnswer",
    {
        "stopped": serializers.ListField(child=serializers.IntegerField()),
        "requeued": serializers.ListField(child=serializers.IntegerField()),
    },
)


class AgentView(generics.GenericAPIView):
    """Base of the agent endpoints: ``Authorization: Node <token>``, no throttling."""

    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]
    throttle_classes: list[Any] = []


class AgentJobEventView(AgentView):
    """A node agent reports an event of one of its jobs (docs/AGENT.md §2)."""

    serializer_class = AgentEventSerializer

    @extend_schema(responses={200: AgentAnswer, **agent_errors(400, 401, 403, 404, 409)})
    def post(self, request: Request, job_id: str) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            event = service.AgentEvent(**serializer.validated_data)
            answer = service.record_event(request.auth, int(job_id), event)
        except service.AgentError as exc:
            return Response({"error": str(exc)}, status=exc.status)
        return Response(answer)


class AgentHeartbeatView(AgentView):
    """A node agent's heartbeat: GPUs' health and the jobs it runs (docs/AGENT.md §3)."""

    serializer_class = HeartbeatSerializer

    @extend_schema(responses={200: HeartbeatAnswer, **agent_errors(400, 401, 403)})
    def post(self, request: Request) -> Response:
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        node = request.auth
        mismatch = token_node_mismatch(node, data["node"])
        if mismatch is not None:
            return mismatch
        runnable.record_executor(node, data.get("executor"))
        latency = data["report_latency_s"]
        return Response(
            service.record_heartbeat(node, data["gpus"], data["running"], report_latency_s=latency)
        )
