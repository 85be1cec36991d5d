"""``GET /api/v1/admin/usage/``: every tenant's standing against its quota now and its GPU-hours
over sliding windows, with the windowed fairness of each window (docs/API.md; docs/FAIRNESS.md §1
"Over quota" and §4)."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster import usage_serializers as shapes
from cluster.models import Tenant
from cluster.views import WINDOWS_PARAMETER, windows_of
from scheduling import service

AdminUsage = inline_serializer(
    "AdminUsage",
    {
        "windows_s": serializers.ListField(child=serializers.IntegerField()),
        "tenants": inline_serializer(
            "AdminTenantUsage",
            {
                "id": serializers.IntegerField(),
                "name": serializers.CharField(),
                "quota": shapes.QuotaUseSerializer(),
                "gpu_hours": shapes.TenantWindowSerializer(many=True),
            },
            many=True,
        ),
        "fairness": shapes.WindowFairnessSerializer(many=True),
    },
)


class AdminUsageView(APIView):
    """Admins: per tenant (name order) ``quota`` (over quota, borrowed GPUs, per GPU type) and
    ``gpu_hours`` per window; ``fairness``: the windowed fairness of each window, naming the
    tenants it is taken over."""

    permission_classes = [permissions.IsAdminUser]

    @extend_schema(parameters=[WINDOWS_PARAMETER], responses={200: AdminUsage, 400: OpenApiResponse()})
    def get(self, request: Request) -> Response:
        windows = windows_of(request)
        names = dict(Tenant.objects.order_by("name").values_list("pk", "name"))
        use = service.quota_use(names)
        usage = service.usage_windows(windows, timezone.now(), names)
        body: dict[str, Any] = {
            "windows_s": list(windows),
            "tenants": [
                {
                    "id": t,
                    "name": name,
                    "quota": shapes.quota_use_data(use[t]),
                    "gpu_hours": shapes.windows_data(usage.per_tenant[t]),
                }
                for t, name in names.items()
            ],
            "fairness": shapes.fairness_data(usage.fairness, names),
        }
        return Response(body)
