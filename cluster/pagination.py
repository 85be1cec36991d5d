"""Pagination of list endpoints."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

from cluster.query_params import number_too_long, single_or_400, whole_number

#: Largest ``?offset=`` accepted **(ours)**: far above any table's rows, far below the 64-bit
#: range of the databases' OFFSET.
MAX_OFFSET = 10**12


class JobPagination(LimitOffsetPagination):
    """``?limit=`` (1–500, default 50) and ``?offset=`` (0–10^12, default 0); newest jobs first.

    A value that is not a whole number in range is a 400 naming the parameter, never ignored
    (``?offset=null`` used to be read as 0).
    """

    default_limit = 50
    max_limit = 500

    def get_limit(self, request: Request) -> int:
        return self.bounded(request, self.limit_query_param, self.default_limit, 1, self.max_limit)

    def get_offset(self, request: Request) -> int:
        return self.bounded(request, self.offset_query_param, 0, 0, MAX_OFFSET)

    @staticmethod
    def bounded(request: Request, name: str, default: int, lo: int, hi: int) -> int:
        """Query parameter ``name`` as an integer in ``[lo, hi]``; ``default`` when absent.
        Raises ``ValidationError`` (400) otherwise, also when it is given twice."""
        raw = single_or_400(request.query_params, name)
        if raw is None:
            return default
        too_long = number_too_long(raw)
        if too_long is not None:
            raise ValidationError({name: [too_long]})
        value = whole_number(raw)
        if value is None or not lo <= value <= hi:
            raise ValidationError({name: [f"must be a whole number from {lo} to {hi:,}, got {raw[:40]!r}"]})
        return value

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        bounds = {
            self.limit_query_param: {"minimum": 1, "maximum": self.max_limit, "default": self.default_limit},
            self.offset_query_param: {"minimum": 0, "maximum": MAX_OFFSET, "default": 0},
        }
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters
