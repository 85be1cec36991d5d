"""The OpenAPI schema (``/api/schema/``) and its browsable docs (``/api/docs/``), behind a login
unless ``SHAREWISE_PUBLIC_API_DOCS`` is on: an API token or a dashboard session. Anonymous callers
get 401 for the schema and, for the docs page, a redirect to the dashboard's login."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from cluster.renderers import SafeJSONRenderer


class DocsPermission(BasePermission):
    """Anyone when ``SHAREWISE_PUBLIC_API_DOCS`` is on (read at each request), else a logged-in user."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(settings.SHAREWISE_PUBLIC_API_DOCS) or bool(
            request.user and request.user.is_authenticated
        )


class SchemaView(SpectacularAPIView):
    """``/api/schema/`` (YAML, ``?format=json`` for JSON); its errors are the API's JSON."""

    permission_classes = [DocsPermission]

    def handle_exception(self, exc: Exception) -> Any:
        """The error answer (401 for an anonymous caller), rendered as JSON like every API error:
        the schema's negotiated renderer is YAML, which wrote ``error: ...`` as a YAML document."""
        response = super().handle_exception(exc)
        # finalize_response renders with the request's renderer: replace the YAML one
        self.request.accepted_renderer = SafeJSONRenderer()
        self.request.accepted_media_type = SafeJSONRenderer.media_type
        return response


class DocsView(SpectacularSwaggerView):
    """``/api/docs/``: Swagger UI; an anonymous visitor is sent to the login page first."""

    permission_classes = [DocsPermission]

    def permission_denied(
        self, request: Request, message: str | None = None, code: str | None = None
    ) -> None:
        raise RedirectToLogin(request.get_full_path())

    def handle_exception(self, exc: Exception) -> Any:
        if isinstance(exc, RedirectToLogin):
            return redirect_to_login(exc.next_path, settings.LOGIN_URL)
        return super().handle_exception(exc)


class RedirectToLogin(Exception):
    """Raised by :class:`DocsView` for an anonymous visitor; becomes a redirect to the login page."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path
