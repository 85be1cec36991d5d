"""End to end, Kueue-shaped: 15,000 short jobs over 30 tenants in 5 groups through the live service.

What it does: creates a fresh database (the PostgreSQL database named by ``--database-url``,
dropped and recreated; default: a temporary SQLite file), migrates it, registers 30 nodes × 20
GPUs and the 30 tenants of the scenario (benchmarks/kueue_shape.py: the shape of Kueue's scheduler
performance test and how it maps onto Sharewise), then runs everything a live cluster runs, in
this process: the web service (Django's threaded WSGI server, as ``manage.py demo``), the
submissions through the REST API at the scenario's times (the demo's replay: jobs due together
go as one bulk ``POST /api/v1/jobs/bulk/`` per tenant, 429s retried), the scheduler's ticks
every ``--round-interval`` wall seconds (``scheduling.service.tick``), and one emulated node
agent per node that runs each placed job for its runtime and reports start, progress and finish
over HTTP (the demo's fleet, speedup 1). The per-tenant submission throttle is raised (the
scenario submits about 384 jobs/s at first).

It prints the machine and load, progress lines while it runs, then: the end-to-end time (first
submission to last finish, the server's timestamps), jobs/s, this process's CPU time, the
rounds, how far the replay fell behind the scenario's times, and per class the time to admission
(submission → the write of the first placement: benchmarks/admission.py) as mean, p50, p90, p99
and max, beside Kueue's published figures (351 s end to end; mean admission 215 s small, 77 s
medium, 6.7 s large). Where the replay fell behind, the jobs due meanwhile went together, one
request per tenant, and were placed together: classes can then show the same figures.

Not a test: nothing is asserted. ``--jobs 1500`` runs a tenth of the scenario quickly;
``--write-trace PATH`` only writes the workload as a Chronus-format CSV for
``manage.py demo --trace PATH`` and exits.

Run: ``python benchmarks/bench_kueue.py [--jobs 15000] [--round-interval 0.5]
[--policy sjf-bsbf-fair] [--database-url postgres://postgres@127.0.0.1:5432/sharewise_bench_kueue]``
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the project's packages, for kueue_shape

import fresh_db  # noqa: E402  # benchmarks/fresh_db.py
import kueue_shape as shape  # noqa: E402  # benchmarks/kueue_shape.py
from admission import admission_s  # noqa: E402  # benchmarks/admission.py
from cli_args import database_url, policy_name, positive_float, positive_int  # noqa: E402
from machine import machine  # noqa: E402  # benchmarks/machine.py
from sampler import Sampler  # noqa: E402  # benchmarks/sampler.py
from sql_timing import SqlTiming  # noqa: E402  # benchmarks/sql_timing.py
from thread_cpu import postgres_cpu_s, thread_cpu_s  # noqa: E402  # benchmarks/thread_cpu.py


def setup_django(database_url: str) -> None:
    """Point Django at a fresh database at ``database_url`` (a PostgreSQL one is dropped and
    recreated) with the submission throttle out of the way, and migrate it quietly."""
    os.environ.setdefault("SHAREWISE_SUBMIT_RATE", "1000000/s")
    # every round kept: the admissions are dated by the rounds that wrote the placements
    os.environ.setdefault("SHAREWISE_ROUNDS_KEPT", "1000000000")
    fresh_db.setup_django(database_url)


def populate() -> Any:  # a demo.database.Setup (Django is set up after import)
    """The scenario's nodes and tenants (guaranteed 20 GPUs, borrowing limit 100 each); the
    demo's :class:`~demo.database.Setup` of their tokens."""
    from cluster.models import Node, Tenant
    from common.shapes import node_names
    from demo.database import Setup

    node_tokens = {}
    for name in node_names(shape.NODES):
        node, token = Node.register(name, shape.GPUS_PER_NODE, 49_140, "v100")
        node_tokens[node.name] = token
    tenant_tokens = {}
    for name in shape.tenant_names():
        _, tenant_tokens[name] = Tenant.create_with_owner(
            name, quota_gpus=shape.NOMINAL_GPUS, borrow_limit=shape.BORROW_LIMIT_GPUS
        )
    quotas = dict.fromkeys(shape.tenant_names(), shape.NOMINAL_GPUS)
    return Setup(node_tokens, tenant_tokens, "", "", quotas)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0…1) of ``values``, nearest rank (the smallest value with at least
    ``q`` of them at or below it)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 1))
    return ordered[int(rank) - 1]


def replay_lag_s(rows: list[tuple], trace_ids: dict[int, int], due_s: dict[int, float]) -> float:
    """How far (s) the submissions fell behind the scenario: the most, over the submitted jobs,
    of (its ``submitted_at`` − the first's) − (its scenario time − the first's). ``rows``:
    ``(pk, GPUs, submitted_at, …)``; ``trace_ids``: pk → trace job id; ``due_s``: trace job id →
    scenario submit time (s). 0 for no job."""
    known = sorted((r[2], due_s[trace_ids[r[0]]]) for r in rows if r[0] in trace_ids)
    if not known:
        return 0.0
    at0, due0 = known[0]
    return max(((at - at0).total_seconds() - (due - due0) for at, due in known), default=0.0)


def run(args: argparse.Namespace) -> bool:
    """Set up, run the scenario live, print the figures (see the module docstring); whether
    every job finished."""
    from django.db import connection

    from cluster.models import Job, Placement
    from demo.fleet import start_agents
    from demo.live import Clock, LiveRun, serve, wait_for_jobs
    from demo.options import DemoConfig
    from demo.workload import Workload
    from scheduling import service
    from scheduling.models import Round
    from scheduling.sim.loaders import LoadedTrace

    # agents' reports of jobs stopped meanwhile are refused (409): expected, as in the demo
    logging.getLogger("agent").setLevel(logging.ERROR)
    logging.getLogger("django.request").setLevel(logging.ERROR)
    jobs = shape.kueue_workload(args.jobs)
    setup = populate()
    config = DemoConfig(
        nodes=shape.NODES,
        gpus_per_node=shape.GPUS_PER_NODE,
        policy=args.policy,
        speedup=1.0,
        round_interval_s=args.round_interval,
        port=0,
        exit_when_done=True,
        timeout_s=args.timeout,
    )
    trace = LoadedTrace("kueue-shaped", jobs, {}, len(jobs), ("kueue-shaped",))
    server, web = serve(config.host, 0)
    base_url = f"http://{config.host}:{server.server_address[1]}"
    live = LiveRun(config, Workload(trace, jobs, False), setup, base_url, Clock(0.0, 1.0))
    agents, deliver = start_agents(live)
    service.set_dispatcher(service.local_dispatch)
    service.subscribe(deliver)
    threads = [
        threading.Thread(target=live.replay, name="replay", daemon=True),
        agents,
        threading.Thread(target=live.schedule, name="rounds", daemon=True),
    ]
    sampler = Sampler(thread=args.profile_thread).start() if args.profile else None
    timing = SqlTiming(args.sql_timing).start() if args.sql_timing else None
    cpu0, wall0 = time.process_time(), time.monotonic()
    for thread in threads:
        thread.start()
    by_thread: dict[str, float] = {}
    postgres: float | None = None
    try:
        finished = wait_for_jobs(live, threads[0])
        by_thread, postgres = thread_cpu_s(), postgres_cpu_s()  # before the threads end
    finally:
        live.stop.set()
        if sampler is not None:
            sampler.stop()
        for thread in threads:
            thread.join(timeout=20)
        service.unsubscribe(deliver)
        service.set_dispatcher(None)
        server.shutdown()
        server.server_close()
        web.join(timeout=5)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    load = os.getloadavg()

    rows = list(Job.objects.values_list("pk", "gpus", "submitted_at", "finished_at", "status"))
    admission, undated = admission_s(
        [(pk, gpus, submitted) for pk, gpus, submitted, _, _ in rows],
        Placement.objects.values_list("job_id", "created_at"),
        dict(Round.objects.values_list("started_at", "finished_at")),
        shape.class_of,
    )
    lag = replay_lag_s(rows, live.job_ids, {j.id: j.submit_time for j in jobs})
    ends = [r[3] for r in rows if r[3] is not None]
    e2e = (max(ends) - min(r[2] for r in rows)).total_seconds() if ends else float("nan")
    done = sum(1 for r in rows if r[4] == Job.Status.SUCCEEDED)
    connection.close()

    print(f"\n{'all finished' if finished else 'NOT all finished'}: {done}/{len(jobs)} succeeded")
    for error in live.errors[:5]:
        print(f"error: {error}")
    label = "end to end" if finished else "partial run, not a result: until the last finish so far"
    kueue = (
        f"Kueue's scenario of {shape.KUEUE_JOBS:,}: {shape.KUEUE_WALL_S:g} s, "
        f"{shape.KUEUE_JOBS / shape.KUEUE_WALL_S:.1f} jobs/s"
    )
    if ends:
        print(f"{label} (first submission to last finish): {e2e:.1f} s, {done / e2e:.1f} jobs/s ({kueue})")
    else:  # nothing finished: no time to state (it had printed "nan s, nan jobs/s")
        print(f"no job finished within the run, so no end-to-end time ({kueue})")
    print(
        f"wall {wall:.1f} s, this process's CPU {cpu:.1f} s ({cpu / wall:.0%} of one core); "
        f"{live.rounds} rounds; load average after {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    parts = sorted(by_thread.items(), key=lambda kv: -kv[1])
    if done:  # per finished job; with none finished there is nothing to divide by
        print(
            "CPU per finished job by thread: "
            + ", ".join(
                f"{name} {1000 * cpu / done:.1f} ms" for name, cpu in parts if cpu >= 0.05 * done / 1000
            )
            + (f"; PostgreSQL backends {1000 * postgres / done:.1f} ms" if postgres is not None else "")
        )
    if sampler is not None:
        print(sampler.report(args.profile_top))
    if timing is not None:
        print(timing.report(args.profile_top))
    print(
        f"submitted {len(rows)} of {len(jobs)}; the replay ran up to {lag:.1f} s behind the scenario's "
        "times (jobs due meanwhile went together, one request per tenant)"
    )
    print(
        "time to admission (submission -> the write of the first placement), s"
        + (f"; {undated} placed job(s) without their round, left out:" if undated else ":")
    )
    print(f"  {'class':<7} {'jobs':>6} {'mean':>7} {'p50':>7} {'p90':>7} {'p99':>7} {'max':>7}  Kueue mean")
    for cls in shape.CLASSES:
        values = admission.get(cls.name, [])
        if not values:
            print(f"  {cls.name:<7} {0:>6}")
            continue
        figures = [statistics.fmean(values)] + [percentile(values, q) for q in (0.5, 0.9, 0.99, 1.0)]
        cells = " ".join(f"{v:7.2f}" for v in figures)
        print(f"  {cls.name:<7} {len(values):>6} {cells}  {shape.KUEUE_ADMISSION_S[cls.name]:g}")
    return finished


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=shape.KUEUE_JOBS,
        help=shape.JOBS_HELP,
    )
    parser.add_argument(
        "--round-interval", type=positive_float, default=0.5, help="wall s between ticks (0.5)"
    )
    parser.add_argument(
        "--policy", type=policy_name, default="sjf-bsbf-fair", help="policy name (sjf-bsbf-fair)"
    )
    parser.add_argument(
        "--timeout", type=positive_float, default=1800.0, help="give up after this many wall s"
    )
    parser.add_argument(
        "--database-url",
        type=database_url,
        default=None,
        help="database to (re)create (default: temp SQLite)",
    )
    parser.add_argument("--profile", action="store_true", help="print where the threads spent their time")
    parser.add_argument(
        "--profile-top", type=positive_int, default=40, help="functions the profile lists (40)"
    )
    parser.add_argument("--profile-thread", default="", help="profile only threads named so (prefix)")
    parser.add_argument(
        "--sql-timing",
        type=positive_float,
        default=None,
        metavar="WINDOW_S",
        help="time every SQL statement, per window of this many s; print the top (--profile-top)",
    )
    parser.add_argument("--write-trace", type=Path, default=None, help="only write the workload as CSV here")
    args = parser.parse_args()
    if args.write_trace is not None:
        jobs = shape.kueue_workload(args.jobs)
        error = shape.write_trace_or_error(args.write_trace, jobs)
        if error is not None:
            print(error, file=sys.stderr)
            sys.exit(2)
        print(f"wrote {len(jobs)} jobs to {args.write_trace}")
        return
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp(prefix='sharewise-bench-')}/kueue.sqlite3"
    print(machine())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    counts = shape.scaled_counts(args.jobs)
    print(
        f"{len(shape.tenant_names())} tenants in {shape.COHORTS} groups, {shape.NODES}x{shape.GPUS_PER_NODE} "
        f"GPUs; {shape.total_jobs(args.jobs)} jobs (--jobs {args.jobs}: per tenant {counts}); "
        f"{args.policy}, ticks every {args.round_interval:g} s; "
        f"{'PostgreSQL' if url.startswith('postgres') else 'SQLite'}"
    )
    setup_django(url)
    if not url.startswith("postgres"):
        from demo.database import tune_sqlite

        tune_sqlite()
    if not run(args):
        sys.exit(1)  # a run that did not finish is no result


if __name__ == "__main__":
    main()
