"""What one agent heartbeat costs as ended jobs pile up behind it (docs/PERFORMANCE.md §10).

What it does: creates a fresh PostgreSQL database (the one named by ``--database-url``, dropped
and recreated), migrates it, registers the Kueue-shaped cluster (30 nodes × 20 GPUs, 30 tenants:
benchmarks/kueue_shape.py), then for each size in ``--ended`` (ascending) lets that many jobs live
and end as the service writes them — placed (a placement row on each of its GPUs, the job
``running``), progress, ended (the rows inactive, the job ``succeeded``), each step its own
statement, so each leaves the dead row versions a live run leaves on a server whose autovacuum
has not run — one after the other on the other 29 nodes in turn, in Kueue's mix by count (7 of
1 GPU, 2 of 5, 1 of 20 in every 10). Then node-00 runs 20 small jobs and sends ``--reports``
batch reports that carry only its heartbeat listing them, each with more progress (``POST
/api/v1/agent/batch/`` through Django's test client, the agent's real request). ``--vacuum``
runs ``VACUUM`` on the jobs and placements first (what a deployment's autovacuum does sooner or
later).

It prints the machine and load, then per size the median over the reports of the wall time, the
CPU time of this process (the view's Python) and that of its PostgreSQL backend (``/proc``: the
server must run on this machine, else ``—``), and the statements each report sent.

Not a test: nothing is asserted. The Kueue-shaped run's 30 nodes send up to one heartbeat each a
second, so a heartbeat's backend time × 30 is the share of a core the heartbeats alone take.

Run: ``python benchmarks/bench_heartbeat.py --database-url
postgres://postgres@127.0.0.1:5432/sharewise_bench_heartbeat [--ended 1500 12000] [--reports 30]
[--vacuum]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the project's packages, for kueue_shape

import kueue_shape as shape  # noqa: E402  # benchmarks/kueue_shape.py
from cli_args import positive_int  # noqa: E402  # benchmarks/cli_args.py
from fresh_db import backend_cpu_s, setup_django  # noqa: E402  # benchmarks/fresh_db.py
from machine import machine  # noqa: E402  # benchmarks/machine.py

BATCH_URL = "/api/v1/agent/batch/"
#: The classes' GPUs in the order the jobs are made: Kueue's mix by count (7 small of 1 GPU, 2
#: medium of 5, 1 large of 20 in every 10: benchmarks/kueue_shape.py).
MIX = (1, 1, 1, 5, 1, 1, 20, 1, 5, 1)
#: One job's life, each step one statement as the service's own: placed (its GPU ids in the
#: first statement's array; the job's id in every other %s), running, progress, its rows ended,
#: succeeded.
LIFE = (
    "INSERT INTO cluster_placement (job_id, gpu_id, generation, sub_batch, slot, active, created_at) "
    "SELECT %s, g, 1, 64, 0, true, now() FROM unnest(%s::bigint[]) AS g",
    "UPDATE cluster_job SET status = 'running', started_at = now() WHERE id = %s",
    "UPDATE cluster_job SET iterations_done = 5 WHERE id = %s",
    "UPDATE cluster_placement SET active = false, ended_at = now() WHERE active AND job_id = %s",
    "UPDATE cluster_job SET status = 'succeeded', iterations_done = iterations, finished_at = now() "
    "WHERE id = %s",
)


def postgres_url(text: str) -> str:
    """``--database-url``: a PostgreSQL URL (the dead row versions measured are PostgreSQL's)."""
    if not text.startswith(("postgres://", "postgresql://")):
        raise argparse.ArgumentTypeError(f"needs a PostgreSQL URL (postgres://...), got {text!r}")
    return text


def populate() -> tuple[str, list[Any], list[Any]]:
    """The scenario's nodes and tenants; node-00's agent token, the nodes' GPUs by node (a list
    of lists, nodes by name, GPUs by index) and the tenants."""
    from cluster.models import GPU, Node, Tenant
    from common.shapes import node_names

    tokens = {}
    for name in node_names(shape.NODES):
        _, tokens[name] = Node.register(name, shape.GPUS_PER_NODE, 49_140, "v100")
    tenants = [
        Tenant.create_with_owner(name, quota_gpus=shape.NOMINAL_GPUS, borrow_limit=shape.BORROW_LIMIT_GPUS)[0]
        for name in shape.tenant_names()
    ]
    gpus: dict[str, list[Any]] = {}
    for gpu in GPU.objects.select_related("node").order_by("node__name", "index"):
        gpus.setdefault(gpu.node.name, []).append(gpu)
    first = sorted(tokens)[0]
    return tokens[first], [gpus[name] for name in sorted(gpus)], tenants


def end_jobs(count: int, first: int, gpus: list[list[Any]], tenants: list[Any]) -> None:
    """Let ``count`` more jobs live and end, one after the other (module docstring), the ``k``-th
    of the benchmark (``k`` from ``first``) of :data:`MIX` ``[k % 10]`` GPUs on node ``k`` of
    ``gpus`` (round robin), for tenant ``k`` of ``tenants``."""
    from django.db import connection, transaction

    from cluster.models import Job

    with transaction.atomic():
        made = Job.objects.bulk_create(
            Job(
                tenant=tenants[k % len(tenants)],
                name="ended",
                model=shape.MODEL,
                batch_size=64,
                iterations=10,
                gpus=MIX[k % len(MIX)],
            )
            for k in range(first, first + count)
        )
    with connection.cursor() as cursor:
        for k, job in enumerate(made, start=first):
            node_gpus = [g.pk for g in gpus[k % len(gpus)][: job.gpus]]
            cursor.execute(LIFE[0], [job.pk, node_gpus])
            for sql in LIFE[1:]:
                cursor.execute(sql, [job.pk])


def node_runs(node_gpus: list[Any], tenant: Any) -> list[int]:
    """20 small jobs running on node-00's GPUs (one active placement each); their ids."""
    from cluster.models import Job, Placement

    jobs = Job.objects.bulk_create(
        Job(tenant=tenant, name="live", model=shape.MODEL, batch_size=64, iterations=10**6, gpus=1)
        for _ in node_gpus
    )
    Job.objects.filter(pk__in=[j.pk for j in jobs]).update(status=Job.Status.RUNNING)
    Placement.objects.bulk_create(
        Placement(job=j, gpu=g, generation=1, sub_batch=64, active=True)
        for j, g in zip(jobs, node_gpus, strict=True)
    )
    return [j.pk for j in jobs]


def measure(
    token: str, node_gpus: list[Any], running: list[int], reports: int, start: int
) -> dict[str, float]:
    """Send one untimed and then ``reports`` timed heartbeat-only batch reports of node-00
    (progress ``start``, ``start`` + 1, …); medians of wall (ms), this thread's CPU (ms) and the
    statements per report, and the backend's CPU per report (ms: the mean, /proc counts in clock
    ticks of 10 ms; NaN when it cannot be read)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Node {token}")
    gpus = [{"index": g.index, "uuid": g.uuid, "memory_mb": g.memory_mb, "healthy": True} for g in node_gpus]
    walls, cpus, statements = [], [], []
    backend0: float | None = None
    for r in range(-1, reports):  # -1: the untimed first (caches, the connection)
        body = {
            "node": "node-00",
            "logs": [],
            "events": [],
            "heartbeat": {
                "gpus": gpus,
                "running": [{"job_id": pk, "generation": 1, "iterations_done": start + r} for pk in running],
            },
        }
        if r == 0:
            backend0 = backend_cpu_s()
        c0, w0 = time.thread_time(), time.perf_counter()
        with CaptureQueriesContext(connection) as seen:
            answer = client.post(BATCH_URL, body, format="json")
        if answer.status_code != 200:
            sys.exit(f"heartbeat refused: {answer.status_code} {answer.content[:200]!r}")
        if r >= 0:
            walls.append(time.perf_counter() - w0)
            cpus.append(time.thread_time() - c0)
            statements.append(len(seen.captured_queries))
    backend1 = backend_cpu_s()
    backend = float("nan") if backend0 is None or backend1 is None else (backend1 - backend0) / reports
    return {
        "wall": 1000 * statistics.median(walls),
        "cpu": 1000 * statistics.median(cpus),
        "backend": 1000 * backend,
        "statements": statistics.median(statements),
    }


def vacuum() -> None:
    """``VACUUM`` the jobs and placements (outside a transaction: Django's autocommit)."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in ("cluster_job", "cluster_placement"):
            cursor.execute(f"VACUUM {table}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", type=postgres_url, required=True, help="PostgreSQL database to (re)create"
    )
    parser.add_argument(
        "--ended",
        type=positive_int,
        nargs="+",
        default=[1500, 12000],
        help="ended jobs before each measure (1500 12000)",
    )
    parser.add_argument("--reports", type=positive_int, default=30, help="heartbeats timed at each size (30)")
    parser.add_argument(
        "--vacuum", action="store_true", help="VACUUM jobs and placements before each measure"
    )
    args = parser.parse_args()
    print(machine())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    setup_django(args.database_url)
    from django.test.utils import setup_test_environment

    setup_test_environment(debug=False)  # the test client's host is allowed
    token, gpus, tenants = populate()
    running = node_runs(gpus[0], tenants[0])
    print(
        f"{shape.NODES}x{shape.GPUS_PER_NODE} GPUs, {len(tenants)} tenants; "
        f"node-00 runs {len(running)} jobs; "
        f"{args.reports} heartbeats a size; {'VACUUM before each' if args.vacuum else 'no VACUUM'}"
    )
    print(f"{'ended jobs':>10} {'wall ms':>8} {'CPU ms':>7} {'backend ms':>10} {'statements':>10}")
    done, progress = 0, 1
    for size in sorted(set(args.ended)):
        end_jobs(size - done, done, gpus[1:], tenants)  # node-00's GPUs are taken
        done = size
        if args.vacuum:
            vacuum()
        m = measure(token, gpus[0], running, args.reports, progress)
        progress += args.reports + 1
        print(
            f"{size:>10,} {m['wall']:>8.2f} {m['cpu']:>7.2f} {m['backend']:>10.2f} {m['statements']:>10.0f}"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
