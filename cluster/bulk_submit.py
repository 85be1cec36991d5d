"""Bulk submission: ``POST /api/v1/jobs/bulk/`` with up to :data:`MAX_BULK_JOBS` jobs at once.

Each job is validated as ``POST /api/v1/jobs/`` validates one (the same serializer, the cluster's
bounds read once for all); all or nothing: one invalid job and none is submitted, the answer
naming each invalid job by its index. A job may carry its own ``idempotency_key`` (the header's
rules; the ``Idempotency-Key`` header itself is a 400 here, not ignored): a key already used with
the same fields answers that job again (a retried bulk request submits nothing twice), with other
fields it is a 422. The new jobs and their ``submitted``
events are written with two multi-row INSERTs in one transaction. The per-tenant submission
throttle counts every job of the request.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import permissions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster import cluster_facts, fast_submit
from cluster.models import Job, JobEvent, Tenant, request_digest
from cluster.pending_count import pending_jobs
from cluster.permissions import IsTenantMember, tenant_of
from cluster.serializers import JobSerializer
from cluster.throttles import SubmissionThrottle
from cluster.views import MAX_IDEMPOTENCY_KEY, ErrorSerializer
from scheduling import service

#: Most jobs in one bulk submission **(ours)**: about 75 KB of JSON at 150 bytes a job; the body
#: limit (``DATA_UPLOAD_MAX_MEMORY_SIZE``, 64 KiB by default) may bind first (413).
MAX_BULK_JOBS = 500

BulkRequest = inline_serializer(
    "BulkJobs", {"jobs": serializers.ListField(child=JobSerializer(), min_length=1, max_length=MAX_BULK_JOBS)}
)
BulkAnswer = inline_serializer(
    "BulkJobsSubmitted",
    {
        "jobs": JobSerializer(many=True),
        "created": serializers.IntegerField(),
        "replayed": serializers.IntegerField(),
    },
)
BulkError = inline_serializer(
    "BulkError",
    {
        "error": serializers.CharField(),
        "items": serializers.DictField(child=serializers.JSONField(), required=False),
        "fields": serializers.DictField(required=False),
    },
)


def key_error(key: Any) -> str | None:
    """Why ``key`` is not a valid idempotency key (1-128 visible ASCII characters), or ``None``."""
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY:
        return f"must be a string of 1-{MAX_IDEMPOTENCY_KEY} visible ASCII characters"
    if not all(" " < ch < "\x7f" for ch in key):
        return f"must be 1-{MAX_IDEMPOTENCY_KEY} visible ASCII characters"
    return None


def validate_items(items: list[Any]) -> tuple[list[tuple[dict[str, Any], str | None]], dict[str, Any]]:
    """Each item's validated fields and key, and ``{index: errors}`` of the invalid ones (all of
    them are checked, so one answer names every mistake).

    An item is first checked by the plain submission view's check
    (:func:`cluster.fast_submit.validated`: the serializer's own fields, bound once, and the
    same cluster bounds; the same validated fields in the same order); an item it declines, and
    every item when ``SHAREWISE_FAST_SUBMIT`` is false, goes through ``JobSerializer`` for its
    errors. Why: the serializer built per item was half of a bulk request's CPU in the live
    demo (docs/PERFORMANCE.md §10)."""
    facts = cluster_facts.current()
    # one context: the cluster's bounds are read once (JobSerializer)
    context: dict[str, Any] = {"cluster_facts": dict(facts)}
    quick = settings.SHAREWISE_FAST_SUBMIT
    valid: list[tuple[dict[str, Any], str | None]] = []
    errors: dict[str, Any] = {}
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            errors[str(i)] = {"non_field_errors": ["must be a JSON object (one job)"]}
            continue
        fields = dict(item)
        key = fields.pop("idempotency_key", None)
        problems: dict[str, Any] = {}
        if key is not None:
            why = key_error(key)
            if why is None and key in seen:
                why = f"already used by job {seen[key]} of this request"
            if why is not None:
                problems["idempotency_key"] = [why]
            else:
                seen[key] = i
        taken = fast_submit.validated(fields, facts) if quick and not problems else None
        if taken is not None:
            valid.append((taken, key))
            continue
        serializer = JobSerializer(data=fields, context=context)
        if not serializer.is_valid():
            problems.update(serializer.errors)
        if problems:
            errors[str(i)] = problems
        else:
            valid.append((dict(serializer.validated_data), key))
    return valid, errors


class KeyConflicts(Exception):
    """Keys already used with other fields: ``items`` is ``{index: message}`` (answered 422)."""

    def __init__(self, items: dict[str, str]) -> None:
        super().__init__(f"{len(items)} idempotency key(s) reused with a different body")
        self.items = items


def submit_many(
    tenant: Tenant, submitter: Any, items: list[tuple[dict[str, Any], str | None]]
) -> list[tuple[Job, bool]]:
    """Create the pending jobs of validated ``(fields, key)`` items; each job and whether it is new,
    in the items' order. A key already used with the same fields answers its earlier job.

    One query for the earlier keys, then one transaction with one INSERT of the jobs and one of
    their ``submitted`` events. Raises :class:`KeyConflicts` (nothing written) when a key was used
    with other fields, and ``IntegrityError`` when a concurrent request took one of the keys
    between the look-up and the insert (nothing written; sending the request again replays).
    """
    digests = [request_digest(fields) for fields, _ in items]
    keys = [key for _, key in items if key is not None]
    earlier = (
        {job.idempotency_key: job for job in Job.objects.filter(tenant=tenant, idempotency_key__in=keys)}
        if keys
        else {}
    )
    conflicts = {
        str(i): f"Idempotency-Key already used for job {earlier[key].pk} with a different request body"
        for i, ((_, key), digest) in enumerate(zip(items, digests, strict=True))
        if key in earlier and earlier[key].request_digest != digest
    }
    if conflicts:
        raise KeyConflicts(conflicts)
    new = [
        Job(
            tenant=tenant,
            submitter=submitter,
            idempotency_key=key,
            request_digest=digest,
            **{"sharing": tenant.default_sharing, **fields},
        )
        for (fields, key), digest in zip(items, digests, strict=True)
        if key not in earlier
    ]
    with transaction.atomic():
        Job.objects.bulk_create(new)
        JobEvent.objects.bulk_create(
            [JobEvent(job=job, kind=JobEvent.Kind.SUBMITTED, at=job.submitted_at) for job in new]
        )
    fresh = iter(new)
    return [(earlier[key], False) if key in earlier else (next(fresh), True) for _, key in items]


class JobBulkView(APIView):
    """Submit up to :data:`MAX_BULK_JOBS` jobs of the caller's tenant at once (see the module)."""

    permission_classes = [permissions.IsAuthenticated, IsTenantMember]
    throttle_classes = [SubmissionThrottle]

    def submission_cost(self, request: Request) -> int:
        """Submissions this request counts for in the tenant's throttle: its jobs (at least 1)."""
        jobs = request.data.get("jobs") if isinstance(request.data, dict) else None
        return max(1, len(jobs)) if isinstance(jobs, list) else 1

    @extend_schema(
        request=BulkRequest,
        responses={
            201: BulkAnswer,
            200: OpenApiResponse(BulkAnswer, description="Every job a replay of an earlier key."),
            400: BulkError,
            422: BulkError,
            **{code: OpenApiResponse(ErrorSerializer) for code in (401, 403, 409, 413, 415, 429)},
        },
    )
    def post(self, request: Request) -> Response:
        if "Idempotency-Key" in request.headers:
            # A header for the whole request would be silently ignored (a retry then submitted
            # every job again): the keys of a bulk request are its jobs' own
            return Response(
                {
                    "error": "the Idempotency-Key header is for POST /api/v1/jobs/; in a bulk request "
                    'give each job its own "idempotency_key" field'
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        data = request.data
        extra = sorted(set(data) - {"jobs"}) if isinstance(data, dict) else []
        jobs = data.get("jobs") if isinstance(data, dict) else None
        if extra or not isinstance(jobs, list) or not 1 <= len(jobs) <= MAX_BULK_JOBS:
            why = f"unknown field(s) {', '.join(extra)}; " if extra else ""
            return Response(
                {"error": f'{why}expected {{"jobs": [...]}} with 1-{MAX_BULK_JOBS:,} jobs'},
                status=status.HTTP_400_BAD_REQUEST,
            )
        items, errors = validate_items(jobs)
        if errors:
            return Response(
                {
                    "error": f"{len(errors)} of {len(jobs)} job(s) are invalid; none was submitted",
                    "items": errors,
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        tenant = tenant_of(request)
        assert tenant is not None  # IsTenantMember
        full = self.pending_cap_reached(tenant, len(items))
        if full is not None:
            return full
        try:
            done = submit_many(tenant, request.user, items)
        except KeyConflicts as exc:
            return Response(
                {"error": f"{exc}; none was submitted", "items": exc.items},
                status=status.HTTP_422_UNPROCESSABLE_ENTITY,
            )
        except IntegrityError:
            return Response(
                {
                    "error": "a concurrent request used one of these idempotency keys; nothing was "
                    "submitted: send the request again (its keys then answer the jobs already made)"
                },
                status=status.HTTP_409_CONFLICT,
            )
        created = sum(new for _, new in done)
        if created:
            service.request_round()
        answers = []
        for job, new in done:
            job.active_placements = []
            if new:
                job.pending_reason = service.NOT_YET_CONSIDERED
            answers.append(job)
        replayed = [job for job, new in done if not new]
        # 2 queries for all, not 2 per job; 1 when every job is new (none has samples of its own)
        estimates = service.job_estimates(answers, new=not replayed)
        for job in answers:
            job.iteration_estimate = estimates[job.pk]
        if replayed:
            from cluster.job_details import describe_jobs
            from cluster.visibility import Viewer

            describe_jobs(replayed, Viewer(tenant.pk, tenant.name))
        body = {
            "jobs": JobSerializer(answers, many=True).data,
            "created": created,
            "replayed": len(done) - created,
        }
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @staticmethod
    def pending_cap_reached(tenant: Tenant, adding: int) -> Response | None:
        """429 when ``adding`` more pending jobs would take ``tenant`` over
        ``SHAREWISE_MAX_PENDING_PER_TENANT``; ``None`` otherwise. Far from the cap the count may
        be a second old (:func:`cluster.pending_count.pending_jobs`)."""
        limit = int(settings.SHAREWISE_MAX_PENDING_PER_TENANT)
        pending = pending_jobs(tenant.pk, limit, adding)
        if pending + adding <= limit:
            return None
        wait = float(settings.SHAREWISE_ROUND_INTERVAL_S)
        return Response(
            {
                "error": f"tenant {tenant.name} has {pending:,} pending jobs; {adding:,} more would pass "
                f"the {limit:,} it may have (SHAREWISE_MAX_PENDING_PER_TENANT)",
                "retry_after": wait,
            },
            status=status.HTTP_429_TOO_MANY_REQUESTS,
            headers={"Retry-After": str(max(1, round(wait)))},
        )
