"""The API's JSON renderer: UTF-8 output, and never a 500 for text that is not Unicode.

An error message may echo what a client sent (DRF's ``"\\udc00" is not a valid choice.``); a lone
surrogate (U+D800–U+DFFF) in it cannot be encoded as UTF-8. Such a body is written with JSON's
``\\uXXXX`` escapes instead (ASCII, still valid JSON, the same value once parsed).
"""

from __future__ import annotations

import json
from typing import Any

from django.http import JsonResponse
from rest_framework.renderers import JSONRenderer

#: How DRF's renderer writes JSON (``COMPACT_JSON``): no space after ``,`` and ``:``.
COMPACT_SEPARATORS = (",", ":")


class SafeJSONRenderer(JSONRenderer):
    """DRF's :class:`~rest_framework.renderers.JSONRenderer`, falling back to ASCII escapes when
    the data holds a lone surrogate."""

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: dict | None = None
    ) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            return json.dumps(data, cls=self.encoder_class, ensure_ascii=True, allow_nan=False).encode(
                "ascii"
            )


def compact_json(body: Any, status: int = 200) -> JsonResponse:
    """``body`` as a JSON response written as the API's renderer writes it (compact, no spaces),
    for the answers made outside DRF — the 404 and 400 of paths naming nothing, ``/healthz``,
    ``/readyz``, ``/metrics``' 403, the dashboard's errors — so that every JSON body of the
    service reads alike."""
    return JsonResponse(body, status=status, json_dumps_params={"separators": COMPACT_SEPARATORS})
