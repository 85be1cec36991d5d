"""Pagination of list endpoints."""

from rest_framework.pagination import LimitOffsetPagination


class JobPagination(LimitOffsetPagination):
    """``?limit=`` (default 50, at most 500) and ``?offset=``; newest jobs first."""

    default_limit = 50
    max_limit = 500
