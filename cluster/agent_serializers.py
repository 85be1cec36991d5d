"""Request shapes of the node agents' endpoints (docs/AGENT.md §2–3): job events and heartbeats,
with explicit types and bounds (numbers must be JSON numbers, strings JSON strings)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from agent.messages import (
    EVENTS,
    FAILURE_KINDS,
    MAX_REASON_CHARS,
    MAX_REPORT_LATENCY_S,
    NODE_TOKEN_REQUIRED,
    TOKEN_NODE_MISMATCH,
)
from cluster import models, runnable
from cluster.fields import (
    PositiveFloatField,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
)
from cluster.job_serializers import AgentLogSerializer
from common.shapes import MAX_GPUS_PER_NODE


class AgentEventSerializer(serializers.Serializer):
    """A job event from a node agent (AGENT.md §2). Unknown fields are ignored (a newer agent may
    send more). ``iterations_done`` ≥ 0 iterations; ``iter_time_s`` > 0 s or null; ``memory_mb``
    > 0 MB or null; ``reason`` at most ``MAX_REASON_CHARS`` characters (the agent cuts its own to
    that); ``failure_kind`` ``""`` or ``"oom"``."""

    generation = StrictIntegerField(min_value=0, max_value=models.MAX_REPORTED_GENERATION)
    event = serializers.ChoiceField(choices=list(EVENTS))
    iterations_done = StrictFloatField(min_value=0, max_value=models.MAX_ITERATIONS)
    iter_time_s = PositiveFloatField(
        required=False, allow_null=True, default=None, max_value=models.MAX_ITERATION_TIME_S
    )
    reason = StrictCharField(required=False, allow_blank=True, default="", max_length=MAX_REASON_CHARS)
    memory_mb = PositiveFloatField(
        required=False,
        allow_null=True,
        default=None,
        max_value=models.MAX_GPU_MEMORY_MB,
        error_messages={"not_positive": "must be a positive number of MB or null"},
    )
    failure_kind = serializers.ChoiceField(choices=list(FAILURE_KINDS), required=False, default="")


class AgentGPUSerializer(serializers.Serializer):
    """One GPU of a heartbeat: index on the node, uuid, memory (MB, 0 when unreadable), health."""

    index = StrictIntegerField(min_value=0, max_value=1023)
    uuid = StrictCharField(max_length=64, allow_blank=True, required=False, default="")
    memory_mb = StrictIntegerField(min_value=0, max_value=models.MAX_GPU_MEMORY_MB, required=False, default=0)
    healthy = StrictBooleanField()


class AgentRunningSerializer(serializers.Serializer):
    """One job a heartbeat says the node runs."""

    job_id = StrictIntegerField(min_value=0, max_value=models.MAX_ID)
    generation = StrictIntegerField(min_value=0, max_value=models.MAX_REPORTED_GENERATION)
    iterations_done = StrictFloatField(
        min_value=0, max_value=models.MAX_ITERATIONS, required=False, default=0
    )


#: Longest ``running`` list of a heartbeat: two jobs on each of a node's at most 64 GPUs.
MAX_RUNNING_PER_HEARTBEAT = 2 * MAX_GPUS_PER_NODE


def report_latency_field() -> StrictFloatField:
    """A heartbeat's ``report_latency_s`` (AGENT.md §3): how long the agent's previous report took
    from send to answer, a JSON number 0 … ``MAX_REPORT_LATENCY_S`` s; absent (an older agent): 0."""
    return StrictFloatField(min_value=0.0, max_value=MAX_REPORT_LATENCY_S, required=False, default=0.0)


def listed_once(values: Iterable[int], message: str) -> None:
    """Raises ``ValidationError`` with ``message.format(value, count)`` for the first of ``values``
    (in the order of first appearance) listed more than once; nothing when each is listed once."""
    for value, count in Counter(values).items():
        if count > 1:
            raise serializers.ValidationError(message.format(value, count))


class DistinctGPUIndexes:
    """The rule of a heartbeat's ``gpus`` (AGENT.md §3), for the heartbeat endpoint and the batch
    report's heartbeat alike: each GPU of the node once. The server matches GPUs by ``(node,
    index)``, so an index listed twice (say once healthy, once not) would leave it to pick one."""

    def validate_gpus(self, gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``gpus`` unchanged; raises ``ValidationError`` naming the first index listed more than
        once (``"GPU index 1 is listed 2 times; list each GPU of the node once"``)."""
        listed_once(
            (int(gpu["index"]) for gpu in gpus),
            "GPU index {} is listed {} times; list each GPU of the node once",
        )
        return gpus


class DistinctRunningJobs:
    """The rule of a heartbeat's ``running`` (AGENT.md §3), for the heartbeat endpoint and the batch
    report's heartbeat alike: each job once (the agent keeps one run per job,
    ``agent.core.Agent.running``). A job listed twice, say with two generations, would leave the
    server to pick which one the node runs."""

    def validate_running(self, running: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``running`` unchanged; raises ``ValidationError`` naming the first job listed more than
        once (``"job 7 is listed 2 times; list each job the node runs once"``)."""
        listed_once(
            (int(item["job_id"]) for item in running),
            "job {} is listed {} times; list each job the node runs once",
        )
        return running


class HeartbeatSerializer(DistinctGPUIndexes, DistinctRunningJobs, serializers.Serializer):
    """A node agent's heartbeat (AGENT.md §3); ``node`` must be the token's node; each GPU index
    once (:class:`DistinctGPUIndexes`), each running job once (:class:`DistinctRunningJobs`)."""

    node = StrictCharField(max_length=64)
    gpus = AgentGPUSerializer(many=True, max_length=MAX_GPUS_PER_NODE)
    # a node runs at most two jobs per GPU (the paper's pairs): a longer list is no real node's
    running = AgentRunningSerializer(many=True, max_length=MAX_RUNNING_PER_HEARTBEAT)
    executor = serializers.ChoiceField(choices=list(runnable.EXECUTORS), required=False)
    report_latency_s = report_latency_field()


#: Most job events in one batch report (AGENT.md §2b) **(ours)**: the body limit
#: (``DATA_UPLOAD_MAX_MEMORY_SIZE``, 64 KiB by default: about 400 events of 160 bytes) binds first.
MAX_BATCH_EVENTS = 500
#: Most output chunks in one batch report: the agent's shipper sends at most 50 a pass.
MAX_BATCH_CHUNKS = 50


class BatchEventSerializer(AgentEventSerializer):
    """One job event of a batch report: an event of AGENT.md §2 and its ``job_id``."""

    job_id = StrictIntegerField(min_value=0, max_value=models.MAX_ID)


class BatchChunkSerializer(AgentLogSerializer):
    """One output chunk of a batch report: a chunk of AGENT.md §2a and its ``job_id``."""

    job_id = StrictIntegerField(min_value=0, max_value=models.MAX_ID)


class BatchHeartbeatSerializer(DistinctGPUIndexes, DistinctRunningJobs, serializers.Serializer):
    """The heartbeat of a batch report: a heartbeat of AGENT.md §3 without its ``node`` (the
    report's), under the same rules (:class:`DistinctGPUIndexes`, :class:`DistinctRunningJobs`)."""

    gpus = AgentGPUSerializer(many=True, max_length=MAX_GPUS_PER_NODE)
    running = AgentRunningSerializer(many=True, max_length=MAX_RUNNING_PER_HEARTBEAT)
    executor = serializers.ChoiceField(choices=list(runnable.EXECUTORS), required=False)
    report_latency_s = report_latency_field()


class BatchReportSerializer(serializers.Serializer):
    """One node's report of a tick (AGENT.md §2b): ``node`` (the token's), optional output
    ``logs`` (≤ :data:`MAX_BATCH_CHUNKS`), job ``events`` in the order they happened
    (≤ :data:`MAX_BATCH_EVENTS`), a ``heartbeat`` and ``after``, the pull transport's cursor
    (0 … 2⁶³ − 1; the answer then carries the orders after it)."""

    node = StrictCharField(max_length=64)
    logs = BatchChunkSerializer(many=True, max_length=MAX_BATCH_CHUNKS, required=False, default=list)
    events = BatchEventSerializer(many=True, max_length=MAX_BATCH_EVENTS, required=False, default=list)
    heartbeat = BatchHeartbeatSerializer(required=False, allow_null=True, default=None)
    after = StrictIntegerField(
        min_value=0, max_value=2**63 - 1, required=False, allow_null=True, default=None
    )


#: The ``code`` values of an agent endpoint's 403 (docs/AGENT.md §1): the agent stops on each.
AGENT_ERROR_CODES = (TOKEN_NODE_MISMATCH, NODE_TOKEN_REQUIRED)


class AgentErrorSerializer(serializers.Serializer):
    """The error body of an agent endpoint: `error`; `fields` for a 400; `code` for the 403s the
    agent stops on (docs/AGENT.md §1), with `token_node` and `node` for `token_node_mismatch`."""

    # (schema only: the bodies come from cluster.exceptions, cluster.permissions.token_node_mismatch
    # and cluster.authentication.wrong_kind_of_credentials; tests/api/test_schema.py holds them to it)

    error = serializers.CharField()
    fields = serializers.DictField(required=False, help_text="400: field name → its messages")
    code = serializers.ChoiceField(
        choices=list(AGENT_ERROR_CODES),
        required=False,
        help_text=f"403 only: `{TOKEN_NODE_MISMATCH}` (the token is another node's) or "
        f"`{NODE_TOKEN_REQUIRED}` (credentials other than a node token); the agent stops on either",
    )
    token_node = serializers.CharField(
        required=False, help_text=f"`{TOKEN_NODE_MISMATCH}`: whose token it is"
    )
    node = serializers.CharField(
        required=False, help_text=f"`{TOKEN_NODE_MISMATCH}`: the node it reports for"
    )


def agent_errors(*codes: int) -> dict[int, OpenApiResponse]:
    """``extend_schema`` response entries for an agent endpoint's error statuses ``codes``: each
    the ``AgentError`` body (:class:`AgentErrorSerializer`)."""
    return {code: OpenApiResponse(AgentErrorSerializer) for code in codes}
