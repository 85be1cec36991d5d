"""Strict JSON request parsing with clear messages, and content negotiation that reads only a
body of a concrete JSON media type.

Body size is bounded before parsing: DRF reads the body through Django's ``HttpRequest.body``,
which raises ``RequestDataTooBig`` above ``DATA_UPLOAD_MAX_MEMORY_SIZE``; the exception handler
(:mod:`cluster.exceptions`) turns that into 413.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request

#: A ``\uD800``–``\uDFFF`` escape: the only way a lone surrogate gets into parsed JSON (the UTF-8
#: decoder refuses encoded ones). Valid pairs match too; :func:`lone_surrogate_key` tells them apart.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class DuplicateKey(ValueError):
    """An object of parsed JSON gives one key twice; ``key`` is that key."""

    def __init__(self, key: str) -> None:
        # json.dumps quotes the key with ASCII escapes, so a control character cannot reach a log
        super().__init__(f"malformed JSON: key {json.dumps(key)} given twice in one object; give it once")
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` ``object_pairs_hook``: the object's dict, or :class:`DuplicateKey` when a key
    comes twice (``{"gpus": 1, "gpus": 2}``: JSON leaves it undefined, Python kept the last value,
    so a job asked for 2 GPUs while the sender may have read 1)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return data


class StrictJSONParser(JSONParser):
    """JSON without NaN/Infinity; ``ParseError`` (400) for malformed, non-UTF-8 or absurdly nested
    JSON, for an object giving a key twice (:func:`unique_keys`), and for an object key holding a
    lone surrogate (``{"\\udc00": 1}``: not a Unicode
    character, so no error message could name it). A lone surrogate in a string *value* is the
    field's error (DRF's ``CharField`` refuses it, naming the field)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode("utf-8")
            data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=unique_keys)
        except UnicodeDecodeError:
            raise ParseError("request body is not valid UTF-8") from None
        except DuplicateKey as exc:
            raise ParseError(str(exc)) from None
        except ValueError as exc:
            raise ParseError(f"malformed JSON: {exc}") from None
        except RecursionError:
            raise ParseError("malformed JSON: nested too deeply") from None
        if SURROGATE_ESCAPE.search(text) and lone_surrogate_key(data):
            raise ParseError("malformed JSON: an object key holds a lone surrogate (\\ud800-\\udfff)")
        return data


def lone_surrogate_key(data: Any) -> bool:
    """Whether an object key anywhere in parsed JSON holds an unpaired surrogate (U+D800–U+DFFF)."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if any(isinstance(k, str) and any("\ud800" <= ch <= "\udfff" for ch in k) for k in item):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _reject_constant(name: str) -> None:
    """``json.loads`` hook refusing NaN and ±Infinity, which are not JSON."""
    raise ValueError(f"{name} is not valid JSON")


class StrictContentNegotiation(DefaultContentNegotiation):
    """Content negotiation whose request side takes only a concrete media type: a body sent as
    ``Content-Type: */*`` or ``application/*`` names no format, so it is 415 rather than read as
    JSON (responses negotiate on ``Accept`` as DRF does)."""

    def select_parser(self, request: Request, parsers: list[BaseParser]) -> BaseParser | None:
        media_type = (request.content_type or "").split(";", 1)[0].strip()
        if "*" in media_type:
            return None
        return super().select_parser(request, parsers)
