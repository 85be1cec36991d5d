"""The stored output of jobs (stdout and stderr as their agents captured it), bounded per job.

A job's log is one text, addressed by character offsets (Unicode code points) from its start;
it is kept as :class:`JobLogChunk` rows, each holding the text from ``offset`` on. What arrives
comes from *runs*: one run is one job started on one node (``node/g<generation>``, the start's
generation, docs/AGENT.md §2a); :class:`JobLogRun` remembers how much of each run's own output has
arrived, so a chunk delivered twice is stored once. When more than ``SHAREWISE_JOB_LOG_MAX_CHARS``
characters are kept, the oldest chunks are deleted (the end of a log says most about a failure).
The append and read logic is :mod:`cluster.joblogs`.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class JobLogRun(models.Model):
    """One run's output stream: ``received`` characters of it have arrived (its next offset),
    ``eof`` once its agent said the run's output is complete."""

    job = models.ForeignKey("cluster.Job", on_delete=models.CASCADE, related_name="log_runs")
    key = models.CharField(max_length=128)
    node = models.CharField(max_length=64)
    received = models.BigIntegerField(default=0)
    eof = models.BooleanField(default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "key"], name="joblogrun_unique_key_per_job"),
            models.CheckConstraint(condition=Q(received__gte=0), name="joblogrun_received_non_negative"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} run {self.key}: {self.received} characters{' (eof)' if self.eof else ''}"


class JobLogChunk(models.Model):
    """A piece of a job's log: ``text`` from character ``offset`` of the job's log on, from ``run``."""

    job = models.ForeignKey("cluster.Job", on_delete=models.CASCADE, related_name="log_chunks")
    run = models.ForeignKey(JobLogRun, on_delete=models.CASCADE, related_name="chunks")
    offset = models.BigIntegerField()
    text = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["job", "offset"]
        constraints = [
            models.UniqueConstraint(fields=["job", "offset"], name="joblogchunk_unique_offset_per_job"),
            models.CheckConstraint(condition=Q(offset__gte=0), name="joblogchunk_offset_non_negative"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} log [{self.offset}, {self.end})"

    @property
    def end(self) -> int:
        """The offset just past this chunk."""
        return self.offset + len(self.text)
