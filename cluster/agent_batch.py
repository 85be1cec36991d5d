"""``POST /api/v1/agent/batch/``: one request per node and tick carrying all it has to say — job
output, job events, its heartbeat — answered with what each item did and, for the pull
transport, the node's new orders (docs/AGENT.md §2b).

Why: end to end, the requests per job (its start, progress, output and finish, each a request
with its own authentication and transaction, plus a heartbeat per node) were the largest cost
of the live service (docs/PERFORMANCE.md §10). The single-item endpoints stay
(``agent/jobs/{id}/events/``, ``agent/jobs/{id}/logs/``, ``agent/heartbeat/``,
``agent/orders/``) and mean the same.

Semantics: the whole body is validated first, with the same fields and bounds as the single
endpoints; anything malformed is a 400 naming the item (``events[3].generation``) and nothing is
applied. Then, in this order (a job's last lines before its ``finished``, the ``finished``
before the heartbeat that no longer lists the job): the output chunks, each event in the order
given, the heartbeat, the orders. Each item is applied as if it came alone, all or nothing:
the chunks together in one transaction, set-wise (:func:`cluster.joblogs.append_outputs`: a
fixed number of statements for all of them, each chunk seeing the ones before it), each event
in its own. An item the server refuses — 404 unknown job, 403 a job never placed on this node,
409 a stale generation — is answered with that status and message in its place, writes
nothing, and the others are applied all the same (a stale event of a run the server already
replaced must not hold back the node's other jobs). An outage met midway (503) leaves the items
before it applied: the agent sends the batch again, and every item is idempotent.

Units: seconds (s), characters.
"""

from __future__ import annotations

import time
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from cluster import runnable
from cluster.agent_serializers import BatchReportSerializer, agent_errors
from cluster.authentication import NodeTokenAuthentication
from cluster.joblogs import OutputChunk, OutputRefused, append_outputs
from cluster.models import Node
from cluster.permissions import IsNodeAgent, token_node_mismatch
from cluster.quick_validation import quick_validator
from scheduling import service
from scheduling.service.orders import poll_orders

ITEM_FIELDS = {
    "job_id": serializers.IntegerField(),
    "code": serializers.IntegerField(help_text="the HTTP status the item alone would get"),
    "status": serializers.CharField(required=False, help_text="events: the job's status"),
    "accepted": serializers.BooleanField(required=False),
    "received": serializers.IntegerField(required=False, help_text="logs: characters of the run"),
    "error": serializers.CharField(required=False),
}
BatchAnswer = inline_serializer(
    "AgentBatchAnswer",
    {
        "logs": inline_serializer("AgentBatchLogItem", ITEM_FIELDS, many=True),
        "events": inline_serializer("AgentBatchEventItem", ITEM_FIELDS, many=True),
        "heartbeat": serializers.DictField(allow_null=True),
        "orders": serializers.DictField(required=False),
    },
)


def apply_chunks(node: Node, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Store the validated output chunks of ``node``'s report, set-wise in one transaction
    (:func:`cluster.joblogs.append_outputs`, AGENT.md §2a); their answers in their order:
    ``{"job_id", "code": 200, "received"}``, or ``{"job_id", "code": 404 | 403, "error"}``."""
    items = [OutputChunk(int(c["job_id"]), c["run"], c["offset"], c["data"], c["eof"]) for c in chunks]
    answers = []
    for item, got in zip(items, append_outputs(node, items), strict=True):
        if isinstance(got, OutputRefused):
            answers.append({"job_id": item.job_id, "code": got.status, "error": str(got)})
        else:
            answers.append({"job_id": item.job_id, "code": 200, "received": got})
    return answers


def apply_event(node: Node, item: dict[str, Any]) -> dict[str, Any]:
    """Apply one validated job event of ``node`` (:func:`scheduling.service.record_event`, its own
    transaction); its answer: ``{"job_id", "code": 200, "status", "accepted"}``, or ``{"job_id",
    "code": 404 | 403 | 409, "error"}``."""
    fields = dict(item)
    job_id = int(fields.pop("job_id"))
    try:
        answer = service.record_event(node, job_id, service.AgentEvent(**fields))
    except service.AgentError as exc:
        return {"job_id": job_id, "code": exc.status, "error": str(exc)}
    return {"code": 200, **answer}


#: Fewest seconds between two notes that a report's node was heard from while its items are
#: applied **(ours)**: each note is an UPDATE; a second keeps it far inside the heartbeat timeout.
HEARD_EVERY_S = 1.0


class Heard:
    """Notes that ``node`` is heard from (:func:`scheduling.service.mark_heard`) when its report
    is read and then at most every :data:`HEARD_EVERY_S` while its items are applied: under load
    one report took up to 17 s here (docs/PERFORMANCE.md §10), and the node — whose next report
    waits for this one's answer — must not look silent for the time the server takes."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._last = float("-inf")

    def __call__(self) -> None:
        """Note it now, unless noted less than :data:`HEARD_EVERY_S` ago."""
        now = time.monotonic()
        if now - self._last >= HEARD_EVERY_S:
            self._last = now
            service.mark_heard(self._node, timezone.now())


def apply_report(node: Node, report: dict[str, Any]) -> dict[str, Any]:
    """Apply a validated batch report of ``node`` (the module's order and semantics); the answer
    body: ``{"logs": [...], "events": [...], "heartbeat": {"stopped", "requeued"} | None}``, plus
    ``"orders": {"cursor", "orders"}`` when the report gave ``after``. The node counts as heard
    from while it is applied (:class:`Heard`; a heartbeat without items: by its own
    record)."""
    heard = Heard(node)
    if report["logs"] or report["events"] or report["heartbeat"] is None:
        # a heartbeat with no items records its own time at once: no UPDATE more (the most
        # frequent report of the end-to-end runs, PERFORMANCE.md §10)
        heard()
    answer: dict[str, Any] = {"logs": [], "events": [], "heartbeat": None}
    if report["logs"]:
        answer["logs"] = apply_chunks(node, report["logs"])
        heard()
    for item in report["events"]:
        answer["events"].append(apply_event(node, item))
        heard()
    beat = report["heartbeat"]
    if beat is not None:
        runnable.record_executor(node, beat.get("executor"))
        answer["heartbeat"] = service.record_heartbeat(
            node, beat["gpus"], beat["running"], report_latency_s=beat["report_latency_s"]
        )
    if report["after"] is not None:
        answer["orders"] = poll_orders(node, report["after"], 0.0).payload()
    return answer


class AgentBatchView(generics.GenericAPIView):
    """A node agent's report of one tick: output, events, heartbeat; its orders back (AGENT.md §2b)."""

    serializer_class = BatchReportSerializer
    authentication_classes = [NodeTokenAuthentication]
    permission_classes = [IsNodeAgent]
    throttle_classes: list[Any] = []

    @extend_schema(responses={200: BatchAnswer, **agent_errors(400, 401, 403, 413)})
    def post(self, request: Request) -> Response:
        # the serializer's rules checked without building it per request (cluster.quick_validation:
        # a quarter of a report's CPU in the live demo); any doubt, and every refusal, is DRF's
        report = quick_validator(BatchReportSerializer)(request.data)
        if report is None:
            serializer = self.get_serializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            report = serializer.validated_data
        node = request.auth
        mismatch = token_node_mismatch(node, report["node"])
        if mismatch is not None:
            return mismatch
        return Response(apply_report(node, report))
