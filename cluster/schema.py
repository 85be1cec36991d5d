"""The error responses every API operation may give, added to the OpenAPI schema in one place
(drf-spectacular ``POSTPROCESSING_HOOKS``), so that no operation leaves out a status it answers.

Each is the ``Error`` body (``{"error": ..., "fields"?, "retry_after"?}``, :mod:`cluster.exceptions`):

======  ==================================================================================
status  which operations
======  ==================================================================================
400     those with a request body or query parameters (validation, malformed JSON)
401     all (no or bad token)
403     all (not a member of a tenant, not staff, another node's token)
404     those with a path parameter (no such row, or another tenant's)
406     all (an ``Accept`` that JSON does not satisfy)
413     those with a request body (larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE``)
415     those with a request body (a content type other than ``application/json``)
503     all (the database, cache or broker unreachable from this server)
======  ==================================================================================

Statuses particular to one operation (409, 422, 429) are declared on its view. The node agents'
endpoints declare theirs with the ``AgentError`` body instead (``error``, ``fields``, and the
coded 403's ``code``, ``token_node``, ``node``: :class:`cluster.agent_serializers.AgentErrorSerializer`).
"""

from __future__ import annotations

from typing import Any

ERROR_REF = {"$ref": "#/components/schemas/Error"}
DESCRIPTIONS = {
    "400": "Invalid input: the message names the field.",
    "401": "No token, or an unknown one.",
    "403": "Not allowed for this caller.",
    "404": "Not found (or another tenant's).",
    "406": "The Accept header asks for something other than JSON.",
    "413": "Request body too large.",
    "415": "Content-Type is not application/json.",
    "503": "A service this server depends on is unreachable; retry after Retry-After seconds.",
}
METHODS = ("get", "put", "post", "patch", "delete")


def error_statuses(operation: dict[str, Any], has_path_parameter: bool) -> list[str]:
    """The statuses of the table above that apply to ``operation``."""
    statuses = ["401", "403", "406", "503"]
    has_query = any(p.get("in") == "query" for p in operation.get("parameters", []))
    has_body = "requestBody" in operation
    if has_body or has_query:
        statuses.append("400")
    if has_path_parameter:
        statuses.append("404")
    if has_body:
        statuses += ["413", "415"]
    return statuses


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: add the missing error responses to every operation."""
    result.setdefault("components", {}).setdefault("schemas", {}).setdefault(
        "Error",
        {
            "type": "object",
            "properties": {
                "error": {"type": "string"},
                "fields": {"type": "object", "additionalProperties": {}},
                "retry_after": {"type": "number", "format": "double"},
            },
            "required": ["error"],
        },
    )
    for path, item in result.get("paths", {}).items():
        for method in METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            responses = operation.setdefault("responses", {})
            for code in error_statuses(operation, "{" in path):
                responses.setdefault(
                    code,
                    {
                        "description": DESCRIPTIONS[code],
                        "content": {"application/json": {"schema": ERROR_REF}},
                    },
                )
    return result
