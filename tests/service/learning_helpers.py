"""Helpers of the closed-loop sharing tests: a fleet with agent tokens, jobs written to the
database, rounds run with their after-commit dispatch, agent events posted over the API.

The fleet: node-00 and node-01, four 16,000 MB V100s each (8 GPUs), with their agent tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from cluster.models import Job, JobEvent, Node, Placement, Tenant
from scheduling import service
from scheduling.core import types as core
from scheduling.models import Round


def make_fleet() -> dict[str, tuple[Node, str]]:
    """node-00 and node-01 (4 GPUs of 16,000 MB each) → (node, raw agent token)."""
    return {f"node-0{i}": Node.register(f"node-0{i}", 4, 16_000, "v100") for i in range(2)}


def make_job(tenant: Tenant, name: str, **fields: Any) -> Job:
    """A pending job written straight to the database (ResNet-18, batch 128, 1 GPU by default)."""
    values: dict[str, Any] = {"model": "resnet18", "batch_size": 128, "iterations": 1000, "gpus": 1}
    values.update(fields)
    job = Job.objects.create(tenant=tenant, name=name, **values)
    JobEvent.objects.create(job=job, kind=JobEvent.Kind.SUBMITTED)
    return job


def run_round(capture: Callable, policy: str | core.Policy = "sjf-bsbf") -> Round | None:
    """One round and its after-commit dispatch (the test's transaction never commits)."""
    with capture(execute=True):
        return service.run_round(policy=policy)


class Fixed:
    """A policy that starts the given jobs where told (to set up a co-location by hand)."""

    name = "fixed"
    preemptive = False

    def __init__(self, *starts: core.Start) -> None:
        self.starts = starts

    def decide(self, snapshot: core.Snapshot, profile: core.Profile, *, explain: bool = True) -> Any:
        return core.RoundDecisions(self.name, snapshot.now, self.starts, (), ())


def start(job: Job, gpu_ids: tuple[int, ...], sub_batch: int | None = None) -> core.Start:
    """A start of ``job`` on core GPU ids ``gpu_ids`` at ``sub_batch`` (default: its batch)."""
    sub = sub_batch or job.batch_size
    return core.Start(job.pk, gpu_ids, sub, job.batch_size // sub)


def node_of(job: Job) -> str:
    """The node holding the job's first active placement."""
    return Placement.objects.filter(job=job, active=True).values_list("gpu__node__name", flat=True).first()


def generation_of(job: Job) -> int:
    """The generation of the job's active rows (what its agent has applied after dispatch)."""
    return Placement.objects.filter(job=job, active=True).values_list("generation", flat=True).first()


def report(
    fleet: dict[str, tuple[Node, str]], job: Job, capture: Callable, node: str | None = None, **body: Any
) -> Any:
    """Post one agent event of ``job`` from its node (default: where it runs, at its generation)."""
    node = node or node_of(job)
    payload: dict[str, Any] = {"generation": generation_of(job), "event": "progress", "iterations_done": 0}
    payload.update(body)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Node {fleet[node][1]}")
    with capture(execute=True):
        return client.post(f"/api/v1/agent/jobs/{job.pk}/events/", payload, format="json")


def co_located() -> set[frozenset[int]]:
    """Pairs of job ids sharing a GPU now."""
    by_gpu: dict[int, set[int]] = {}
    for job, gpu in Placement.objects.filter(active=True).values_list("job_id", "gpu_id"):
        by_gpu.setdefault(gpu, set()).add(job)
    return {frozenset(jobs) for jobs in by_gpu.values() if len(jobs) > 1}
