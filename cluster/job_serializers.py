"""Shapes of a job's history and output in the API, and of the output agents send
(docs/API.md "Events" and "Logs", docs/AGENT.md §2a)."""

from __future__ import annotations

from rest_framework import serializers

from cluster.models import JobEvent
from cluster.serializers import StrictCharField, StrictIntegerField

#: Most characters of output one agent request carries (its JSON stays under the 64 KiB body limit
#: even with every character escaped as ``\\uXXXX``).
MAX_LOG_CHUNK_CHARS = 4000


class JobEventSerializer(serializers.ModelSerializer):
    """One entry of a job's history: ``kind``, when (``at``), a ``message`` (the policy's reason,
    who cancelled, why it failed) and ``data`` (e.g. ``gpus`` and ``sub_batch`` of a placement, the
    ``node`` and ``iterations_done`` an agent reported)."""

    class Meta:
        model = JobEvent
        fields = ["kind", "at", "message", "data"]
        read_only_fields = fields


class LogPieceSerializer(serializers.Serializer):
    """A piece of a job's output (:class:`cluster.joblogs.LogPiece`): characters ``offset`` to
    ``next_offset`` of its log; ``first_offset`` the oldest kept; ``complete`` once nothing more
    will come."""

    offset = serializers.IntegerField()
    next_offset = serializers.IntegerField()
    data = serializers.CharField(trim_whitespace=False)
    first_offset = serializers.IntegerField()
    complete = serializers.BooleanField()


class AgentLogSerializer(serializers.Serializer):
    """A chunk of one run's output from a node agent: ``run`` (``node/g<generation>``), ``offset``
    (characters of that run's output before ``data``), ``data`` (up to
    :data:`MAX_LOG_CHUNK_CHARS` characters) and ``eof`` (the run's output is complete)."""

    run = StrictCharField(max_length=128, min_length=1)
    offset = StrictIntegerField(min_value=0, max_value=2**62)
    data = StrictCharField(max_length=MAX_LOG_CHUNK_CHARS, allow_blank=True, trim_whitespace=False)
    eof = serializers.BooleanField(required=False, default=False)
