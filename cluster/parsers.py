"""Strict JSON request parsing with clear messages.

Body size is bounded before parsing: DRF reads the body through Django's ``HttpRequest.body``,
which raises ``RequestDataTooBig`` above ``DATA_UPLOAD_MAX_MEMORY_SIZE``; the exception handler
(:mod:`cluster.exceptions`) turns that into 413.
"""

from __future__ import annotations

import json
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class StrictJSONParser(JSONParser):
    """JSON without NaN/Infinity; ``ParseError`` (400) for malformed, non-UTF-8 or absurdly nested JSON."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        raw = stream.read() if stream is not None else b""
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
