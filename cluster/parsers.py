"""Request parsing with a size bound: bodies over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` get 413."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser


class PayloadTooLarge(APIException):
    """HTTP 413: the request body exceeds ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "request body too large"
    default_code = "payload_too_large"


class BoundedJSONParser(JSONParser):
    """Strict JSON (no NaN/Infinity) of at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes.

    Raises :class:`PayloadTooLarge` (413) for a larger body, whatever its declared length, and
    ``ParseError`` (400) for malformed, non-UTF-8 or absurdly nested JSON.
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        too_large = f"request body larger than {limit} bytes"
        if declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(too_large)
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(too_large)
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError:
            raise ParseError("request body is not valid UTF-8") from None
        except ValueError as exc:
            raise ParseError(f"malformed JSON: {exc}") from None
        except RecursionError:
            raise ParseError("malformed JSON: nested too deeply") from None


def _reject_constant(name: str) -> None:
    """``json.loads`` hook refusing NaN and ±Infinity, which are not JSON."""
    raise ValueError(f"{name} is not valid JSON")
