"""The live run read back from the database as the simulator's result, in trace seconds, and its
fidelity to the simulator (ratio of the average JCTs).

Units: seconds (s) of trace time, GPU-seconds (GPU-s).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from cluster.models import Job, JobEvent, Placement
from demo.live import LiveRun
from scheduling.core.metrics import JobOutcome
from scheduling.models import Round, SlowdownObservation
from scheduling.sim.engine import SimResult


def live_result(run: LiveRun, policy: str) -> SimResult:
    """The live run as a :class:`SimResult` in trace seconds, read from the database: JCT from
    ``submitted_at`` and ``finished_at``; queueing delay = time pending before each placement;
    the GPU timeline and GPU-seconds from the placements (a GPU shared by two jobs charges each
    half, TESTING.md invariant 7)."""
    clock = run.clock
    ids = run.job_ids
    jobs = {j.pk: j for j in Job.objects.filter(pk__in=list(ids)).select_related("tenant")}
    placements = list(
        Placement.objects.filter(job_id__in=list(ids)).values_list(
            "job_id", "gpu_id", "created_at", "ended_at"
        )
    )
    # sweep of placement starts and ends over every GPU
    points: list[tuple[float, int, int, int]] = []  # (t, +1/-1, gpu, job)
    for job_pk, gpu, created, ended in placements:
        end = clock.of(ended) if ended is not None else clock.trace_now()
        points.append((clock.of(created), 1, gpu, job_pk))
        points.append((end, -1, gpu, job_pk))
    points.sort(key=lambda p: (p[0], p[1]))
    residents: dict[int, set[int]] = defaultdict(set)
    gpu_s: dict[int, float] = defaultdict(float)
    timeline: list[tuple[float, int, int]] = []
    last = None
    for t, delta, gpu, job_pk in points:
        if last is not None and t > last:
            for members in residents.values():
                for member in members:
                    gpu_s[member] += (t - last) / len(members)
        last = t
        if delta > 0:
            residents[gpu].add(job_pk)
        else:
            residents[gpu].discard(job_pk)
        busy = sum(1 for m in residents.values() if m)
        shared = sum(1 for m in residents.values() if len(m) > 1)
        if timeline and timeline[-1][0] == t:
            timeline[-1] = (t, busy, shared)
        else:
            timeline.append((t, busy, shared))
    waits: dict[int, float] = defaultdict(float)
    pending_since: dict[int, float] = {}
    preemptions: dict[int, int] = defaultdict(int)
    for job_pk, kind, at in (
        JobEvent.objects.filter(job_id__in=list(ids)).order_by("at", "id").values_list("job_id", "kind", "at")
    ):
        t = clock.of(at)
        if kind in (JobEvent.Kind.SUBMITTED, JobEvent.Kind.PREEMPTED, JobEvent.Kind.REQUEUED):
            pending_since.setdefault(job_pk, t)
            if kind == JobEvent.Kind.PREEMPTED:
                preemptions[job_pk] += 1
        elif kind == JobEvent.Kind.PLACED and job_pk in pending_since:
            waits[job_pk] += t - pending_since.pop(job_pk)
    outcomes = []
    unfinished = []
    for pk, job in sorted(jobs.items(), key=lambda kv: (kv[1].finished_at or kv[1].submitted_at, kv[0])):
        if job.status != Job.Status.SUCCEEDED or job.finished_at is None:
            unfinished.append(ids[pk])
            continue
        first = clock.of(job.started_at) if job.started_at else clock.of(job.finished_at)
        outcomes.append(
            JobOutcome(
                ids[pk],
                job.tenant.name,
                job.gpus,
                clock.of(job.submitted_at),
                first,
                clock.of(job.finished_at),
                waits[pk],
                gpu_s[pk],
                preemptions=preemptions[pk],
            )
        )
    missing = [j.id for j in run.workload.jobs if j.id not in set(ids.values())]
    return SimResult(
        f"{policy} (live)",
        tuple(outcomes),
        tuple(unfinished + missing),
        tuple(timeline),
        run.config.nodes * run.config.gpus_per_node,
        Round.objects.count(),
        sum(preemptions.values()),
        math.nan,
    )


def fidelity(live: dict[str, Any], simulated: dict[str, Any]) -> float:
    """Live average JCT ÷ simulated average JCT (``nan`` when either is missing or zero)."""
    a, b = live.get("avg_jct_s"), simulated.get("avg_jct_s")
    if not a or not b:
        return math.nan
    return float(a) / float(b)


def learning_line(run: LiveRun) -> str:
    """The live service's slowdown predictions of the run: the co-locations measured and the mean
    relative error ``|predicted − measured| / measured`` of the first and the last tenth of them
    (in time order), which falls as the service learns (docs/LEARNING.md, "In the service")."""
    rows = list(
        SlowdownObservation.objects.filter(job__in=list(run.job_ids))
        .order_by("at", "id")
        .values_list("predicted", "measured")
    )
    if not rows:
        return "slowdown predictions (live): no co-location measured"
    errors = [abs(p - m) / m for p, m in rows]
    tenth = max(1, len(errors) // 10)
    first, last = errors[:tenth], errors[-tenth:]
    return (
        f"slowdown predictions (live): {len(errors)} co-locations measured; mean error "
        f"{sum(first) / len(first):.1%} in the first tenth, {sum(last) / len(last):.1%} in the last"
    )


def throughput_line(finished: int, total: int, wall_s: float) -> str:
    """The run's end-to-end rate: ``finished`` of ``total`` jobs in ``wall_s`` wall seconds
    (replay start to the last job's end, or to giving up), as jobs per wall second."""
    rate = finished / wall_s if wall_s > 0 else float("nan")
    return f"end to end: {finished:,} of {total:,} jobs finished in {wall_s:,.1f} s wall ({rate:.1f} jobs/s)"
