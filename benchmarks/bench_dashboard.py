"""Latency of the dashboard's JSON endpoints with 10,000 jobs and 1,024 GPUs in the database.

What it does: creates a fresh database (a temporary SQLite file by default, or the PostgreSQL
database named by ``--database-url``, which is dropped and recreated), migrates it, and writes a
busy cluster: 128 nodes × 8 GPUs, 4 tenants, 10,000 jobs (1,000 running on 1,300 GPU slots of
which 300 GPUs are shared, 6,000 pending, 3,000 succeeded in the last 100 minutes one after
another on 24 GPUs, with their ended placements) and 30 rounds, each with a decision for every
pending job. Then it requests each endpoint through Django's test client (the whole middleware
stack and the database, no HTTP socket) as a cluster admin and as a tenant member, and prints
the median and p95 latency (ms, wall clock and CPU time), the database's CPU time per request
(a local PostgreSQL) and the response size of each.

With ``--churn`` every timed request follows a change of the kind a round makes (outside the
timing): one running single-GPU job finishes (its placement ended now), a pending job starts on
its GPU, and a new round record is written, so the endpoints' caches of what did not change are
tested against data that did; without it nothing changes between requests (cache hits where
an endpoint caches).

After writing the data it runs ``ANALYZE`` (as autovacuum would after a bulk load in a
deployment), so every query is planned with statistics; ``--no-analyze`` leaves them out (the
behaviour of the earlier passes, and of a server with autovacuum off timed straight after loading).

Not a test: nothing is asserted. Target: p95 < 50 ms per endpoint on this machine.

Python's garbage collector adds pauses of 20-50 ms to a few percent of the requests (full
collections walk every object of the process); ``--gc-freeze`` measures what happens when the
start-up objects are frozen first (``gc.freeze()``, e.g. in gunicorn's ``post_fork``), and
``--gc-between-requests`` what a gunicorn worker of ours does (``gunicorn.conf.py``,
``config/web_gc.py``): frozen start-up objects, no automatic full collection, and one run after a
request when due. The ``full gc`` column counts the full collections that began inside the timed
requests.

Run: ``python benchmarks/bench_dashboard.py [--requests 40] [--gc-freeze | --gc-between-requests] [--churn]
[--no-analyze] [--endpoints fairness,timeline] [--database-url postgres://postgres@127.0.0.1:5432/sharewise_bench_dashboard]``
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import fresh_db  # benchmarks/fresh_db.py
from cli_args import database_url, positive_int  # benchmarks/cli_args.py
from machine import machine  # benchmarks/machine.py

REPO = Path(__file__).resolve().parent.parent
ENDPOINTS = ("cluster-map", "timeline", "decisions", "fairness", "queue", "quota", "learning")
TENANTS = ("team-a", "team-b", "team-c", "team-d")
MODELS = ("resnet50", "vgg16", "lm", "transformer", "resnet18", "a3c")


def setup_django(database_url: str) -> None:
    """Point Django at a fresh database at ``database_url`` with the dashboard installed, and
    migrate quietly."""
    fresh_db.setup_django(database_url)
    from django.conf import settings

    if "frontend" not in settings.INSTALLED_APPS:
        sys.exit("the frontend app is not in INSTALLED_APPS (config/settings.py)")


def populate() -> dict[str, Any]:
    """Write the busy cluster described in the module docstring; return the two users."""
    from django.db import transaction
    from django.utils import timezone

    now = timezone.now()
    with transaction.atomic():
        tenants, gpus, users = _cluster_and_people()
        running, done, pending_ids = _jobs(tenants, now)
        _placements(gpus, running, done, since=now - timedelta(minutes=40))
        _rounds(gpus, running, pending_ids, now)
    return users


def _cluster_and_people() -> tuple[list[Any], list[Any], dict[str, Any]]:
    """The tenants (quota 256 GPUs each), 128 nodes × 8 GPUs (in node, index order), a cluster
    admin and a member of the first tenant."""
    from django.contrib.auth import get_user_model

    from cluster.models import GPU, Membership, Node, Quota, Tenant

    tenants = Tenant.objects.bulk_create(Tenant(name=n) for n in TENANTS)
    Quota.objects.bulk_create(Quota(tenant=t, guaranteed_gpus=256) for t in tenants)
    nodes = Node.objects.bulk_create(Node(name=f"node-{i:03d}", agent_token_hash="x") for i in range(128))
    GPU.objects.bulk_create(
        GPU(node=n, index=i, uuid=f"GPU-{n.name}-{i}", memory_mb=32_000) for n in nodes for i in range(8)
    )
    gpus = list(GPU.objects.order_by("node__name", "index"))
    user_model = get_user_model()
    admin = user_model.objects.create_user("admin", is_staff=True)
    member = user_model.objects.create_user("alice")
    Membership.objects.create(user=member, tenant=tenants[0])
    return tenants, gpus, {"admin": admin, "tenant member": member}


def _jobs(tenants: list[Any], now: Any) -> tuple[list[Any], list[Any], list[int]]:
    """1,000 running jobs (100 of them 4-GPU gangs), 6,000 pending and 3,000 succeeded jobs;
    returns the running and succeeded jobs (by id) and the pending ids."""
    from cluster.models import Job

    def job(i: int, status: str, **extra: Any) -> Job:
        return Job(
            tenant=tenants[i % 4],
            name=f"job-{i}",
            model=MODELS[i % len(MODELS)],
            batch_size=64,
            iterations=10_000,
            gpus=extra.pop("gpus", 1),
            status=status,
            **extra,
        )

    running = [
        job(
            i,
            "running",
            gpus=4 if 600 <= i < 700 else 1,
            submitted_at=now - timedelta(minutes=50),
            started_at=now - timedelta(minutes=40),
        )
        for i in range(1000)
    ]
    pending = [job(i, "pending", submitted_at=now - timedelta(seconds=i)) for i in range(1000, 7000)]
    # finished one after another on GPUs 1000..1023, 48 s each, the last one just now
    ends = [now - timedelta(seconds=48 * ((i - 7000) // 24)) for i in range(7000, 10_000)]
    done = [
        job(
            i,
            "succeeded",
            submitted_at=end - timedelta(minutes=10),
            started_at=end - timedelta(seconds=48),
            finished_at=end,
        )
        for i, end in zip(range(7000, 10_000), ends, strict=True)
    ]
    Job.objects.bulk_create(running + pending + done, batch_size=2000)
    return (
        list(Job.objects.filter(status="running").order_by("id")),
        list(Job.objects.filter(status="succeeded").order_by("id")),
        list(Job.objects.filter(status="pending").order_by("id").values_list("id", flat=True)),
    )


def _placements(gpus: list[Any], running: list[Any], done: list[Any], since: Any) -> None:
    """The running jobs on GPUs 0..999 (300 of them sharing GPUs 0..299) since ``since``, and the
    succeeded jobs' ended placements on GPUs 1000..1023."""
    from cluster.models import Placement

    placements = []
    for k, j in enumerate(running[:600]):  # 600 single-GPU jobs on GPUs 0..599
        placements.append(Placement(job=j, gpu=gpus[k], generation=1, sub_batch=64, created_at=since))
    for k, j in enumerate(running[600:700]):  # 100 gangs of 4 on GPUs 600..999
        placements += [
            Placement(job=j, gpu=gpus[600 + 4 * k + g], generation=1, sub_batch=64, created_at=since)
            for g in range(4)
        ]
    for k, j in enumerate(running[700:1000]):  # 300 jobs sharing GPUs 0..299 (slot 1)
        placements.append(Placement(job=j, gpu=gpus[k], generation=1, sub_batch=32, slot=1, created_at=since))
    for k, j in enumerate(done):  # their finished runs, on GPUs 1000..1023
        placements.append(
            Placement(
                job=j,
                gpu=gpus[1000 + k % 24],
                generation=1,
                sub_batch=64,
                active=False,
                created_at=j.started_at,
                ended_at=j.finished_at,
            )
        )
    Placement.objects.bulk_create(placements, batch_size=2000)


def _rounds(gpus: list[Any], running: list[Any], pending_ids: list[int], now: Any) -> None:
    """30 rounds, one a minute up to ``now``, each starting 50 shares and with a wait decision
    for every pending job."""
    from scheduling.models import Round

    waits = [
        {
            "job_id": j,
            "action": "wait",
            "gpu_ids": [],
            "gpus": [],
            "sub_batch": None,
            "accum_steps": None,
            "shares": [],
            "reason": f"rank {r + 1} under sjf-bsbf: needs 1 GPUs, 0 free and no partner pays",
        }
        for r, j in enumerate(pending_ids)
    ]
    starts = [
        {
            "job_id": running[700 + k].pk,
            "action": "start",
            "gpu_ids": [gpus[k].pk],
            "gpus": [f"{gpus[k].node.name}:{gpus[k].index}"],
            "sub_batch": 32,
            "accum_steps": 2,
            "shares": [
                {
                    "partner_id": running[k].pk,
                    "gpu_ids": [gpus[k].pk],
                    "xi_self": 1.4,
                    "xi_partner": 1.3,
                    "t_seq_s": 5000.0,
                    "t_con_s": 4200.0,
                }
            ],
            "reason": "best sharing benefit first",
        }
        for k in range(50)
    ]
    Round.objects.bulk_create(
        Round(
            started_at=now - timedelta(seconds=60 * (30 - r)),
            finished_at=now,
            policy="sjf-bsbf",
            duration_ms=40.0,
            n_started=50,
            n_waiting=len(waits),
            n_preempted=0,
            decisions=starts + waits,
        )
        for r in range(30)
    )


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _churn_db_cpu(churn: Churn) -> float:
    """Make one change (``churn()``) and return the database CPU time it cost (s; 0 where it
    cannot be read), so that ``db cpu`` counts only the requests."""
    before = fresh_db.backend_cpu_s()
    churn()
    after = fresh_db.backend_cpu_s()
    return 0.0 if before is None or after is None else after - before


class Churn:
    """What a round changes between two requests (``--churn``, module docstring): call it once
    per change; the k-th call ends the k-th of the first 600 running placements (single-GPU
    jobs on GPUs 0..599) and starts the oldest pending job on that GPU, then writes a round."""

    def __init__(self) -> None:
        from cluster.models import Placement
        from scheduling.models import Round

        self.placements = list(
            Placement.objects.filter(active=True, slot=0, job__gpus=1).order_by("id")[:600]
        )
        from scheduling.round_waits import pack_waits

        decisions = Round.objects.order_by("-id").values_list("decisions", flat=True)[0]
        # written as the service writes a round: starts as dicts, the waits packed
        self.starts = [d for d in decisions if d["action"] != "wait"]
        self.waits = pack_waits((d["job_id"], d["reason"]) for d in decisions if d["action"] == "wait")
        self.k = 0

    def __call__(self) -> None:
        from django.db import transaction
        from django.utils import timezone

        from cluster.models import Job, Placement
        from scheduling.models import Round

        now = timezone.now()
        old = self.placements[self.k % len(self.placements)]
        self.k += 1
        with transaction.atomic():
            Placement.objects.filter(pk=old.pk).update(active=False, ended_at=now)
            Job.objects.filter(pk=old.job_id).update(status="succeeded", finished_at=now)
            job = Job.objects.filter(status="pending").order_by("submitted_at", "id").first()
            Job.objects.filter(pk=job.pk).update(status="running", started_at=now)
            new = Placement.objects.create(
                job=job, gpu_id=old.gpu_id, generation=1, sub_batch=64, created_at=now
            )
            Round.objects.create(
                started_at=now,
                finished_at=now,
                policy="sjf-bsbf",
                duration_ms=40.0,
                n_started=len(self.starts),
                n_waiting=len(self.waits["job_ids"]),
                n_preempted=0,
                decisions=self.starts,
                waits=self.waits,
            )
        self.placements[(self.k - 1) % len(self.placements)] = new


def measure(
    users: dict[str, Any],
    requests: int,
    endpoints: tuple[str, ...] = ENDPOINTS,
    churn: Churn | None = None,
    between: Callable[[], object] | None = None,
) -> None:
    """Print median and p95 latency per endpoint and viewer: wall clock, and this process's CPU
    time (which, with SQLite in-process, includes the database's work, and does not count time
    lost to other programs on a busy machine); on a local PostgreSQL also the mean CPU time of
    its backend per request (``db cpu``: wall ≈ cpu + db cpu on an idle machine); and how many
    full garbage collections ran inside the timed requests (``full gc``). ``between`` runs after
    each timed request, outside the timing (a server hook's work after the response)."""
    from django.test import Client

    inside = [0]
    timing = [False]

    def count_full(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2 and timing[0]:
            inside[0] += 1

    gc.callbacks.append(count_full)
    print(
        f"{'endpoint':<14}{'viewer':<15}{'wall p50':>9}{'p95':>7}{'cpu p50':>9}{'p95':>7}"
        f"{'db cpu':>8}{'KB':>6}{'full gc':>8}   (ms)"
    )
    for name in endpoints:
        for who, user in users.items():
            client = Client(HTTP_HOST="127.0.0.1")
            client.force_login(user)
            url = f"/dashboard/api/{name}.json"
            response = client.get(url)  # warm-up: profile tables, query compilation, parsed rounds
            assert response.status_code == 200, response.content[:200]
            wall, cpu = [], []
            db0 = fresh_db.backend_cpu_s()
            inside[0] = 0
            for _ in range(requests):
                if churn is not None:
                    db0 = None if db0 is None else db0 + _churn_db_cpu(churn)
                timing[0] = True
                t0, c0 = time.perf_counter(), time.process_time()
                response = client.get(url)
                wall.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.process_time() - c0) * 1000)
                timing[0] = False
                if between is not None:
                    between()
            db1 = fresh_db.backend_cpu_s()
            db = "" if db0 is None or db1 is None else f"{(db1 - db0) * 1000 / requests:.1f}"
            print(
                f"{name:<14}{who:<15}{statistics.median(wall):>9.1f}{_p95(wall):>7.1f}"
                f"{statistics.median(cpu):>9.1f}{_p95(cpu):>7.1f}{db:>8}{len(response.content) / 1024:>6.0f}"
                f"{inside[0]:>8}"
            )
    gc.callbacks.remove(count_full)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--requests", type=positive_int, default=40, help="timed requests per endpoint and viewer"
    )
    parser.add_argument(
        "--database-url",
        type=database_url,
        default=None,
        help="PostgreSQL URL (default: a temporary SQLite file)",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() after setup, as a web worker can after start-up: full garbage "
        "collections then skip the start-up objects (no 20-50 ms pauses)",
    )
    parser.add_argument(
        "--gc-between-requests",
        action="store_true",
        help="as a gunicorn worker (gunicorn.conf.py, config/web_gc.py): start-up objects frozen, "
        "no automatic full collections, one run after a request when due (implies --gc-freeze)",
    )
    parser.add_argument(
        "--churn",
        action="store_true",
        help="before each timed request, change what a round changes (a job ends, another starts, "
        "a round is recorded): caches miss where the data changed",
    )
    parser.add_argument(
        "--no-analyze",
        action="store_true",
        help="do not ANALYZE after loading (by default the planner gets statistics, as "
        "autovacuum gives it in a deployment; without them every query is planned blind)",
    )
    parser.add_argument(
        "--endpoints", default=",".join(ENDPOINTS), help=f"comma-separated subset of {','.join(ENDPOINTS)}"
    )
    args = parser.parse_args()
    endpoints = tuple(e for e in args.endpoints.split(",") if e)
    if not endpoints:
        parser.error("--endpoints names none")
    if unknown := set(endpoints) - set(ENDPOINTS):
        parser.error(f"unknown endpoints: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{tmp}/bench.sqlite3"
        setup_django(url)
        t0 = time.perf_counter()
        users = populate()
        if not args.no_analyze:
            fresh_db.analyze()
        from django.db import connection

        print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
        print(
            f"database: {connection.vendor}; populated in {time.perf_counter() - t0:.1f} s "
            "(1,024 GPUs, 10,000 jobs, 30 rounds of 6,050 decisions)"
        )
        between = None
        if args.gc_between_requests:
            from config import web_gc

            web_gc.after_start()
            between = web_gc.collect_between_requests
            collector = "start-up objects frozen, full collections between requests (config/web_gc.py)"
        elif args.gc_freeze:
            gc.collect()
            gc.freeze()
            collector = "start-up objects frozen"
        else:
            collector = "default"
        print(f"planner statistics: {'none (--no-analyze)' if args.no_analyze else 'ANALYZE after loading'}")
        print(f"garbage collector: {collector}")
        print("between requests: " + ("a round's changes (--churn)" if args.churn else "nothing changes"))
        measure(users, args.requests, endpoints, Churn() if args.churn else None, between)


if __name__ == "__main__":
    main()
