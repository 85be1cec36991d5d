"""TESTING.md invariants 1–9 checked in the database, each break returned as one line of text
(a campaign counts them instead of stopping at the first).

``now`` and the deadlines: a check taken while the deployment runs allows each repair its stated
delay (a silent node's jobs are requeued within the heartbeat timeout; a waiting job starts within
the starvation bound plus the slack of :data:`STARVATION_SLACK_S`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Sum
from django.utils import timezone

from cluster.models import Job, JobEvent, Node, Placement, Quota
from frontend.payloads.bins import usage_bins, window_usage
from scheduling import service
from scheduling.profiles import load_default_profile
from scheduling.service.silence import fleet_hearing, silent_for_s

#: Slack of the starvation check (s) **(ours)**: the longest job of the campaign's load (2 s of
#: wall time), a round, and a fault's downtime with its process restarts (a killed worker is back
#: in a few seconds; its round comes again after the visibility timeout) on a loaded 2-core machine.
STARVATION_SLACK_S = 40.0
#: Tolerance of the accounting balance (GPU-s): timestamps are µs on PostgreSQL.
ACCOUNTING_TOLERANCE_GPU_S = 1e-3


@dataclass(frozen=True, slots=True)
class Limits:
    """The deployment's stated delays (s)."""

    heartbeat_timeout_s: float
    starvation_bound_s: float
    #: a start message reaches the agent, which reports ``started``, within this (s)
    start_report_s: float = 4.0


def capacity_gang_release(now: datetime) -> list[str]:
    """1. capacity (≤ 2 jobs per GPU in distinct slots, their memory fits), 2. gang (a running job
    holds all its GPUs, one sub-batch), 3. distinct GPUs, 5. release (a job not running holds none)."""
    breaks = []
    profile = load_default_profile()
    with service.consistent_view():
        state = service.load_state(now, profile)
        rows = list(
            Placement.objects.filter(active=True).values_list("job_id", "gpu_id", "slot", "sub_batch")
        )
        jobs = dict(Job.objects.values_list("pk", "status"))
        gangs = dict(Job.objects.values_list("pk", "gpus"))
    by_gpu: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    by_job: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for job, gpu, slot, sub in rows:
        by_gpu[gpu].append((job, slot, sub))
        by_job[job].append((gpu, sub))
    for gpu, held in by_gpu.items():
        if len(held) > 2 or len({s for _, s, _ in held}) != len(held):
            breaks.append(f"1 capacity: GPU {gpu} holds {held}")
        core_gpu = state.snapshot.cluster.gpus[state.gpu_ids[gpu]]
        used = sum(profile.memory_mb(state.jobs[j], sub) for j, _, sub in held if j in state.jobs)
        if used > core_gpu.memory_mb:
            breaks.append(f"1 capacity: GPU {gpu} holds {used:.0f} MB of jobs on {core_gpu.memory_mb} MB")
    for job, status in jobs.items():
        held = by_job.get(job, [])
        if status == Job.Status.RUNNING:
            if len(held) != gangs[job] or len({s for _, s in held}) != 1:
                breaks.append(f"2 gang: job {job} holds {len(held)} of its {gangs[job]} GPUs")
            if len({g for g, _ in held}) != len(held):
                breaks.append(f"3 distinct: job {job} holds a GPU twice")
        elif held:
            breaks.append(f"5 release: job {job} is {status} but holds {len(held)} GPUs")
    return breaks


def quota() -> list[str]:
    """4. a tenant's running GPUs never exceed its guarantee plus its borrowing limit."""
    breaks = []
    limits: dict[int, tuple[int, int | None]] = {}
    for tenant, guaranteed, borrow in Quota.objects.values_list(
        "tenant_id", "guaranteed_gpus", "borrow_limit"
    ):
        g, b = limits.get(tenant, (0, 0))
        limits[tenant] = (g + guaranteed, None if b is None or borrow is None else b + borrow)
    used = Job.objects.filter(status=Job.Status.RUNNING).values("tenant_id").annotate(n=Sum("gpus"))
    for row in used:
        if row["tenant_id"] not in limits:
            continue  # no quota row: no limit (docs/FAIRNESS.md §1)
        guaranteed, borrow = limits[row["tenant_id"]]
        if borrow is not None and row["n"] > guaranteed + borrow:
            breaks.append(
                f"4 quota: tenant {row['tenant_id']} runs {row['n']} GPUs > {guaranteed} + {borrow}"
            )
    return breaks


def ledger(now: datetime, limits: Limits) -> list[str]:
    """6. the GPUs the database says are in use are those the agents run: every placement older
    than the start-report delay has a ``started``/``progress`` report from its node since it was
    made, and no placement stays on a node silent (or never heard from) past the timeout, its
    silence counted as the service counts it (:func:`scheduling.service.silence.is_silent`:
    against the newest heartbeat read from any node, the timeout on top of the fleet's report
    latency; the wall clock with a second timeout of grace when the whole fleet fell silent at
    once)."""
    breaks = []
    settled = now - timedelta(seconds=limits.start_report_s)
    hearing = fleet_hearing()
    bound_s = limits.heartbeat_timeout_s + hearing.allowance_s + limits.start_report_s
    silent = now - timedelta(seconds=bound_s)
    placed = (
        Placement.objects.filter(active=True, created_at__lt=settled)
        .values_list(
            "job_id", "gpu__node__name", "created_at", "gpu__node__last_heartbeat", "gpu__node__created_at"
        )
        .order_by()
    )
    first: dict[tuple[int, str], datetime] = {}
    for job, node, created, heartbeat, registered in placed:
        first[(job, node)] = min(created, first.get((job, node), created))
        heard = heartbeat or registered
        if silent_for_s(heartbeat, registered, hearing.newest, now) > bound_s and created < silent:
            breaks.append(f"6 ledger: job {job} still placed on node {node}, silent since {heard:%H:%M:%S}")
    for (job, node), created in first.items():
        reported = JobEvent.objects.filter(
            job_id=job,
            kind__in=(JobEvent.Kind.STARTED, JobEvent.Kind.PROGRESS, JobEvent.Kind.SUCCEEDED),
            data__node=node,
            at__gte=created,
        ).exists()
        if not reported and Job.objects.filter(pk=job, status=Job.Status.RUNNING).exists():
            breaks.append(
                f"6 ledger: job {job} placed on {node} at {created:%H:%M:%S.%f} never reported there"
            )
    return breaks


def accounting(start: datetime, now: datetime) -> list[str]:
    """7. GPU-seconds charged to tenants (the dashboard's charging, a shared GPU split between its
    two jobs by normalised progress) add up to the GPU-seconds the GPUs were busy (the union of
    their placements)."""
    rows = window_usage(start, now)
    width = max(1e-6, (now - start).total_seconds())
    segments = service.charged_segments(start.timestamp(), now.timestamp())
    charged = sum(sum(per_bin) for per_bin in usage_bins(segments, start.timestamp(), width, 1).values())
    busy = 0.0
    by_gpu: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for gpu, _, begin, end in rows:
        if end > begin:
            by_gpu[gpu].append((begin, end))
    for intervals in by_gpu.values():
        reach = float("-inf")
        for begin, end in sorted(intervals):
            busy += max(0.0, end - max(begin, reach))
            reach = max(reach, end)
    if abs(charged - busy) > ACCOUNTING_TOLERANCE_GPU_S + 1e-9 * busy:
        return [f"7 accounting: {charged:.3f} GPU-s charged to tenants, {busy:.3f} GPU-s busy"]
    return []


def starvation(now: datetime, limits: Limits) -> list[str]:
    """8. no pending job has waited longer than the starvation bound plus the stated slack."""
    bound = limits.starvation_bound_s + STARVATION_SLACK_S
    with service.consistent_view():
        pending = service.load_state(now).snapshot.pending
    now_s = now.timestamp()
    return [
        f"8 starvation: job {job.id} ({job.gpus} GPUs) waits {now_s - job.waiting_since:.0f} > {bound:.0f} s"
        for job in pending
        if now_s - job.waiting_since > bound
    ]


def nothing_lost(accepted: Iterable[int], final: bool = False) -> list[str]:
    """9. every accepted job is pending, running or ended with a reason (at the end: succeeded)."""
    ids = set(accepted)
    rows = {pk: (status, reason) for pk, status, reason in Job.objects.filter(pk__in=ids).values_list(
        "pk", "status", "failure_reason"
    )}  # fmt: skip
    breaks = [f"9 lost: accepted job {pk} is not in the database" for pk in sorted(ids - rows.keys())]
    for pk, (status, reason) in sorted(rows.items()):
        if status == Job.Status.FAILED and not reason:
            breaks.append(f"9 lost: job {pk} failed without a reason")
        elif (
            status == Job.Status.CANCELLED
            and not JobEvent.objects.filter(job_id=pk, kind="cancelled").exists()
        ):
            breaks.append(f"9 lost: job {pk} cancelled without a record")
        elif final and status != Job.Status.SUCCEEDED:
            breaks.append(f"9 lost: job {pk} is {status} at the end ({reason or 'no reason'})")
    return breaks


def all_breaks(start: datetime, accepted: Iterable[int], limits: Limits, final: bool = False) -> list[str]:
    """Every invariant, checked on the database now."""
    now = timezone.now()
    return [
        *capacity_gang_release(now),
        *quota(),
        *ledger(now, limits),
        *accounting(start, now),
        *starvation(now, limits),
        *nothing_lost(accepted, final),
    ]


def nodes_never_heard_from() -> list[str]:
    """Names of registered nodes no agent ever reported for (the campaign's "never starts" nodes)."""
    return list(Node.objects.filter(last_heartbeat__isnull=True).values_list("name", flat=True))
