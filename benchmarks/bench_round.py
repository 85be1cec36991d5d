"""Time of one full scheduling round (snapshot, policy, persist, dispatch) on a 1,024-GPU cluster.

What it does: creates a fresh database (the PostgreSQL database named by ``--database-url``, which
is dropped and recreated; default: beside ``DATABASE_URL`` when that is PostgreSQL, else a
temporary SQLite file), migrates it, registers 128 nodes × 8 V100s (49,140 MB) and 4 tenants,
and writes N pending jobs (seeded mix of models, batch sizes, gangs of 1–8 GPUs and lengths; half
with a measured iteration time, half left to the profile's estimate). For each N it runs
``--rounds`` rounds from the same state (placements, events, rounds and agent orders are reset
between them, outside the timing) through ``scheduling.service.run_round`` with the policy
(default SJF-BSBF).
``--scenario fill`` (the default): every job pending on an idle cluster, so the round fills it;
``--scenario steady``: an untimed round fills the cluster, ``--finish`` running jobs finish, and
the timed round starts what fits in their place while the rest keep waiting.

It prints the median of each phase: snapshot (read the database), policy, persist (placements,
jobs, events and the Round record), commit, dispatch (after commit: ``pull``, the default
transport, records the orders in the database; ``local`` hands them to one no-op in-process
subscriber; ``celery`` sends them to Redis), and the whole round as the caller sees it (lease
included), with the CPU time of this process and of its PostgreSQL backend (``/proc``, when the
server runs here): on a loaded machine wall times grow, CPU times much less. ``--profile`` adds
the top functions of one round by cumulative time.

Not a test: nothing is asserted. Target: a full round under 1 s with 10,000 pending jobs.

Run: ``python benchmarks/bench_round.py [--pending 1000 10000] [--rounds 5] [--policy sjf-bsbf]
[--scenario fill|steady] [--finish 16] [--dispatch pull|local|celery] [--profile] [--database-url postgres://postgres@127.0.0.1:5432/sharewise_bench_round]``
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cli_args import database_url, non_negative_int, policy_name, positive_int  # benchmarks/cli_args.py
from fresh_db import analyze, backend_cpu_s, setup_django  # benchmarks/fresh_db.py
from machine import machine  # benchmarks/machine.py

REPO = Path(__file__).resolve().parent.parent
TENANTS = ("team-a", "team-b", "team-c", "team-d")
#: (model, global batch): models of the Tiresias/Muri traces the shipped profile knows.
SHAPES = (
    ("resnet50", 128),
    ("resnet18", 64),
    ("vgg16", 64),
    ("lm", 80),
    ("transformer", 128),
    ("a3c", 32),
    ("resnet50", 64),
    ("ncf", 512),
)
GANGS = ((1, 0.45), (2, 0.25), (4, 0.18), (8, 0.12))
PHASES = ("snapshot", "policy", "persist", "commit", "dispatch")
#: CPU time of this process per phase (ms), measured by wrapping the functions each phase calls:
#: "persist" is ``persist_round`` (placements, jobs, events), "estimates" the waiting jobs'
#: estimated starts (both in the wall-clock persist phase), "record" the rest of the round (the
#: lease, the Round row and its digest, the commit).
CPU_PHASES = ("snapshot", "policy", "persist", "estimates", "record", "dispatch")


class PhaseCPU:
    """This process's CPU time (``time.process_time``, ms) inside the functions a round calls
    for each phase, summed over one round: wall times on a loaded machine grow with the load, CPU
    times much less. Installed by wrapping ``load_state``, ``persist_round`` and
    ``estimates_for`` where ``scheduling.service.rounds`` calls them, the policy's ``decide`` and
    the dispatcher."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, phase: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[phase] = self.spent.get(phase, 0.0) + (time.process_time() - started) * 1e3

        return timed

    def install(self, policy: Any, dispatcher: Any) -> Any:
        """Wrap the round's functions and ``policy.decide``; returns the wrapped ``dispatcher``."""
        from scheduling.service import rounds

        for phase, name in (
            ("snapshot", "load_state"),
            ("persist", "persist_round"),
            ("estimates", "estimates_for"),
        ):
            setattr(rounds, name, self.wrap(phase, getattr(rounds, name)))
        policy.decide = self.wrap("policy", policy.decide)
        return self.wrap("dispatch", dispatcher)


def default_database_url() -> str:
    """``sharewise_bench_round`` on the server of ``DATABASE_URL`` when it is PostgreSQL, else a
    temporary SQLite file."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        return urlsplit(url)._replace(path="/sharewise_bench_round").geturl()
    return f"sqlite:///{tempfile.mkdtemp(prefix='sharewise-bench-')}/round.sqlite3"


def populate_cluster() -> None:
    """128 nodes × 8 GPUs of 49,140 MB and the four tenants (quota 256 GPUs each)."""
    from cluster.models import Node, Tenant

    for n in range(128):
        Node.register(f"node-{n:03d}", 8, 49_140, "v100")
    for name in TENANTS:
        Tenant.create_with_owner(name, quota_gpus=256)


def populate_jobs(count: int, seed: int) -> None:
    """Replace all jobs by ``count`` pending ones (seeded)."""
    from django.utils import timezone

    from cluster.models import Job, Tenant

    Job.objects.all().delete()
    rng = random.Random(seed)
    tenants = list(Tenant.objects.all())
    now = timezone.now()
    gangs, weights = zip(*GANGS, strict=True)
    jobs = []
    for i in range(count):
        model, batch = rng.choice(SHAPES)
        jobs.append(
            Job(
                tenant=rng.choice(tenants),
                name=f"job-{i}",
                model=model,
                batch_size=batch,
                gpus=rng.choices(gangs, weights)[0],
                iterations=rng.choice((500, 2_000, 10_000, 50_000)),
                iteration_time_s=round(rng.uniform(0.05, 0.8), 3) if i % 2 else None,
                submitted_at=now - timezone.timedelta(seconds=count - i),
            )
        )
    Job.objects.bulk_create(jobs, batch_size=2000)


def reset() -> None:
    """Every job pending again, no placement, placement event, round or agent order (nor order
    stream: each node's orders are numbered from 1 again, as in a fresh database), every node
    heard from now (outside the timing). Without the heartbeat, nodes registered longer ago than
    ``SHAREWISE_HEARTBEAT_TIMEOUT_S`` (15 s; populating 10,000 jobs on a loaded machine takes
    longer) would take no job, and the rounds would time an idle cluster. Without removing the
    orders, each round's pull dispatch would add its own to the last ones' (no agent acknowledges
    them here), and past 10,000 a node's would be trimmed inside the timed dispatch."""
    from django.utils import timezone

    from cluster.models import Job, JobEvent, Node, Placement
    from scheduling.models import AgentOrder, OrderStream, Round

    AgentOrder.objects.all().delete()
    OrderStream.objects.all().delete()
    Placement.objects.all().delete()
    JobEvent.objects.all()._raw_delete(JobEvent.objects.db)  # append-only model: bulk delete by hand
    Round.objects.all().delete()
    Job.objects.update(status=Job.Status.PENDING, started_at=None, attained_gpu_s=0.0)
    Node.objects.update(last_heartbeat=timezone.now())
    vacuum_rewritten()


def vacuum_rewritten() -> None:
    """``VACUUM (ANALYZE)`` the tables :func:`reset` rewrites (PostgreSQL only, outside the
    timing). Each reset leaves 10,000 dead job rows and the last round's placements and events;
    a deployment's autovacuum reclaims them, but it may be off on a benchmark server: without
    this, after 6 rounds ``cluster_job`` held 62,316 dead rows beside its 10,000 live ones
    (11 MB), and every later round's snapshot scanned them. Skipped inside a transaction (a
    test's), where PostgreSQL refuses ``VACUUM``."""
    from django.db import connection

    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return
    from cluster.models import Job, JobEvent, Placement
    from scheduling.models import AgentOrder, OrderStream, Round

    with connection.cursor() as cursor:
        for model in (Job, Placement, JobEvent, Round, AgentOrder, OrderStream):
            cursor.execute(f"VACUUM (ANALYZE) {connection.ops.quote_name(model._meta.db_table)}")


def finish_some(count: int) -> None:
    """The ``count`` running jobs of lowest id finish now (placements ended, status succeeded),
    as agents' reports would leave them, and the nodes are heard from (outside the timing)."""
    from django.utils import timezone

    from cluster.models import Job, Node, Placement

    now = timezone.now()
    running = Job.objects.filter(status=Job.Status.RUNNING).order_by("pk")
    ids = list(running.values_list("pk", flat=True)[:count])
    Placement.objects.filter(job_id__in=ids, active=True).update(active=False, ended_at=now)
    Job.objects.filter(pk__in=ids).update(status=Job.Status.SUCCEEDED, finished_at=now)
    Node.objects.update(last_heartbeat=now)


def prepare(args: argparse.Namespace) -> None:
    """The state a timed round starts from. ``fill``: every job pending on an idle cluster.
    ``steady``: after an untimed round filled the cluster, ``--finish`` running jobs finished
    (the next round starts a few and the rest keep waiting); ``--finish 0``: nothing changed."""
    reset()
    if args.scenario == "steady":
        from scheduling import service

        service.run_round(policy=args.policy)
        finish_some(args.finish)


def measure(count: int, args: argparse.Namespace) -> None:
    from django.db import connection

    from scheduling import service

    populate_jobs(count, args.seed)
    if connection.vendor == "postgresql":
        analyze()
    sent: list[int] = []
    if args.dispatch == "celery":
        dispatcher: Any = service.celery_dispatch
    elif args.dispatch == "local":
        dispatcher = service.local_dispatch
        service.subscribe(lambda message: sent.append(1))
    else:
        from scheduling.service.orders import pull_dispatch

        dispatcher = pull_dispatch
    cpu_of = PhaseCPU()
    service.set_dispatcher(cpu_of.install(service.policy_named(args.policy), dispatcher))
    phases: dict[str, list[float]] = {p: [] for p in (*PHASES, "total", "client CPU", "server CPU")}
    cpu_phases: dict[str, list[float]] = {p: [] for p in CPU_PHASES}
    record = None
    for i in range(args.rounds + 1):  # the first round warms caches and is not counted
        prepare(args)
        cpu_of.spent = {}
        server = backend_cpu_s()
        cpu = time.process_time()
        started = time.perf_counter()
        record = service.run_round(policy=args.policy)
        total = (time.perf_counter() - started) * 1e3
        cpu = (time.process_time() - cpu) * 1e3
        server_after = backend_cpu_s()
        if args.dispatch == "celery":
            purge_node_queues()
        if i == 0:
            continue
        for p in PHASES:
            phases[p].append(record.phases_ms.get(p, 0.0))
        phases["total"].append(total)
        phases["client CPU"].append(cpu)
        measured = {p: cpu_of.spent.get(p, 0.0) for p in CPU_PHASES if p != "record"}
        measured["record"] = cpu - sum(measured.values())
        for p, v in measured.items():
            cpu_phases[p].append(v)
        if server is not None and server_after is not None:
            phases["server CPU"].append((server_after - server) * 1e3)
    assert record is not None
    medians = {p: statistics.median(v) for p, v in phases.items() if v}
    print(
        f"\n{count:,} pending jobs, {args.policy}, {args.scenario}, {args.rounds} rounds: "
        f"{record.n_started} started ({sum(1 for d in record.decisions if d.get('shares'))} sharing), "
        f"{record.n_preempted} preempted, {record.n_waiting} waiting"
    )
    for p, values in phases.items():
        if not values:
            continue
        share = f" ({medians[p] / medians['total']:.0%})" if p in PHASES else ""
        print(
            f"  {p:<10} median {medians[p]:8.1f} ms{share:<6}  min {min(values):8.1f}  max {max(values):8.1f}"
        )
    print(
        "  client CPU by phase (median ms): "
        + ", ".join(f"{p} {statistics.median(v):.1f}" for p, v in cpu_phases.items() if v)
    )
    if args.profile:
        profile_one(args)


def profile_one(args: argparse.Namespace) -> None:
    import cProfile
    import pstats

    from scheduling import service

    prepare(args)
    profiler = cProfile.Profile()
    profiler.runcall(service.run_round, policy=args.policy)
    print("  top functions by cumulative time (one round):")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(18)


def purge_node_queues() -> None:
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    client.delete(*(f"node.node-{n:03d}" for n in range(128)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pending", type=positive_int, nargs="+", default=[1_000, 10_000], help="pending jobs"
    )
    parser.add_argument("--rounds", type=positive_int, default=5, help="timed rounds per size (median)")
    parser.add_argument("--policy", type=policy_name, default="sjf-bsbf", help="policy name")
    parser.add_argument(
        "--dispatch",
        choices=("pull", "local", "celery"),
        default="pull",
        help="orders in the database (default), an in-process subscriber, or Celery to REDIS_URL",
    )
    parser.add_argument(
        "--scenario",
        choices=("fill", "steady"),
        default="fill",
        help="fill: every job pending on an idle cluster (default); steady: a full cluster where "
        "--finish jobs just finished",
    )
    parser.add_argument(
        "--finish", type=non_negative_int, default=16, help="jobs finished before a steady round"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="print the top functions of one round")
    parser.add_argument("--database-url", type=database_url, default=None, help="database to (re)create")
    args = parser.parse_args()
    if args.rounds < 1 or any(n < 1 for n in args.pending):
        sys.exit("--rounds and --pending must be positive")
    url = args.database_url or default_database_url()
    if args.dispatch == "celery" and not os.environ.get("REDIS_URL"):
        sys.exit("--dispatch celery needs REDIS_URL")
    setup_django(url)
    from django.db import connection

    populate_cluster()
    print(f"machine: {machine()}")
    print(
        f"database: {connection.vendor} {connection.settings_dict['NAME']}; cluster 128 nodes x 8 GPUs; "
        f"dispatch: {args.dispatch}"
    )
    for count in args.pending:
        measure(count, args)


if __name__ == "__main__":
    main()
