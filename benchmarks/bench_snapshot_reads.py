"""What the round's snapshot reads of its jobs' requeue times and own samples cost as ended jobs
pile up (docs/PERFORMANCE.md §10, "The round's two reads through the status index").

What it does: builds the database of ``benchmarks/bench_heartbeat.py`` (its set-up, reused: the
Kueue-shaped cluster, then for each size in ``--ended`` that many jobs live and end, each step its
own statement, leaving the dead row versions a live run leaves on a server whose autovacuum has
not run), gives each ended job the history a live run leaves (submitted, placed, started,
succeeded events, one in ten preempted and requeued once, one exclusive sample), and keeps an
active set fixed across the sizes: node-00's 20 running jobs with samples, ``--pending`` pending
jobs of which one in ten ran before and was requeued (its events and samples). At each size it
reads one snapshot (``load_state`` in its ``consistent_view``), takes the statements that read
the events (``cluster_jobevent``) and the samples (``scheduling_jobitertime``), and runs
``EXPLAIN (ANALYZE, BUFFERS)`` of each ``--repeat`` times.

It prints the machine and load, then per size and statement the median execution time (ms, the
server's own figure) and the pages it touched (shared buffers hit + read), and the median client
CPU of a whole snapshot (``load_state``, ``--repeat`` of them: this process's side).

Not a test: nothing is asserted (``tests/service/test_round_dead_rows.py`` is the test).

Run: ``python benchmarks/bench_snapshot_reads.py --database-url
postgres://postgres@127.0.0.1:5432/sharewise_bench_snapshot_reads [--ended 1500 12000]
[--pending 500] [--repeat 9]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import bench_heartbeat as heartbeat  # noqa: E402  # benchmarks/bench_heartbeat.py: the set-up
from cli_args import positive_int  # noqa: E402  # benchmarks/cli_args.py
from fresh_db import setup_django  # noqa: E402  # benchmarks/fresh_db.py
from machine import machine  # noqa: E402  # benchmarks/machine.py

#: The statements measured, by the table each reads.
TABLES = {"requeue times": "cluster_jobevent", "own samples": "scheduling_jobitertime"}
ENDED_EVENTS = ("submitted", "placed", "started", "succeeded")
REQUEUE_EVENTS = ("preempted", "requeued")
EVENTS = (
    "INSERT INTO cluster_jobevent (job_id, kind, at, message, data) SELECT j, k, now(), '', '{}'::jsonb "
    "FROM unnest(%s::bigint[]) AS j, unnest(%s::text[]) AS k"
)
SAMPLES = (
    "INSERT INTO scheduling_jobitertime (job_id, count, weight, mean_log, var_log, updated_at) "
    "SELECT j, 1, 1.0, 0.0, 0.0, now() FROM unnest(%s::bigint[]) AS j"
)


def history(job_ids: list[int], kinds: tuple[str, ...], every_tenth: tuple[str, ...]) -> None:
    """Events of ``kinds`` for each of ``job_ids``, ``every_tenth`` for one in ten of them, and one
    exclusive sample each (3 statements)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(EVENTS, [job_ids, list(kinds)])
        cursor.execute(EVENTS, [job_ids[::10], list(every_tenth)])
        cursor.execute(SAMPLES, [job_ids])


def active_set(node_gpus: list[Any], tenants: list[Any], pending: int) -> None:
    """node-00's 20 running jobs (``bench_heartbeat.node_runs``) and ``pending`` pending jobs, one
    in ten of which ran before (``started_at`` set) and was requeued; the running ones and those
    with their samples."""
    from django.db.models import F
    from django.utils import timezone

    from cluster.expressions import AnyOf
    from cluster.models import Job

    running = heartbeat.node_runs(node_gpus, tenants[0])
    waiting = Job.objects.bulk_create(
        Job(
            tenant=tenants[k % len(tenants)],
            name="waiting",
            model="resnet50",
            batch_size=64,
            iterations=10,
            gpus=1,
        )
        for k in range(pending)
    )
    ran = [j.pk for j in waiting[::10]]
    Job.objects.filter(AnyOf(F("pk"), ran)).update(started_at=timezone.now())
    history(ran, ("submitted", "placed", "started"), REQUEUE_EVENTS)  # every tenth of these too
    history(running, ("submitted", "placed", "started"), ())


def snapshot_cpu_ms(repeat: int) -> float:
    """The median over ``repeat`` snapshots (``load_state`` in its ``consistent_view``, after one
    untimed) of this thread's CPU time per snapshot (ms): the client's side of all its queries."""
    from scheduling.service.snapshot import consistent_view, load_state

    times = []
    for r in range(-1, repeat):
        start = time.thread_time()
        with consistent_view():
            load_state()
        if r >= 0:
            times.append(1000 * (time.thread_time() - start))
    return statistics.median(times)


def measure(repeat: int) -> dict[str, tuple[float, int]]:
    """One snapshot's two statements, each ``EXPLAIN (ANALYZE, BUFFERS)`` ``repeat`` times: name →
    (median execution ms, pages touched in the last run)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from scheduling.service.snapshot import consistent_view, load_state

    with CaptureQueriesContext(connection) as seen, consistent_view():
        load_state()
    answer = {}
    for name, table in TABLES.items():
        sql = [q["sql"] for q in seen.captured_queries if f'FROM "{table}"' in q["sql"]]
        if len(sql) != 1:
            sys.exit(f"expected one statement reading {table}, the snapshot sent {len(sql)}")
        times, pages = [], 0
        with connection.cursor() as cursor:
            for _ in range(repeat):
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql[0]}")
                raw = cursor.fetchone()[0]
                (plan,) = json.loads(raw) if isinstance(raw, str) else raw
                times.append(plan["Execution Time"])
                pages = plan["Plan"]["Shared Hit Blocks"] + plan["Plan"]["Shared Read Blocks"]
        answer[name] = (statistics.median(times), pages)
    return answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url", type=heartbeat.postgres_url, required=True, help="PostgreSQL database to (re)create"
    )
    parser.add_argument(
        "--ended", type=positive_int, nargs="+", default=[1500, 12000], help="ended jobs before each measure"
    )
    parser.add_argument("--pending", type=positive_int, default=500, help="pending jobs, fixed (500)")
    parser.add_argument("--repeat", type=positive_int, default=9, help="EXPLAIN runs per statement (9)")
    args = parser.parse_args()
    print(machine())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    setup_django(args.database_url)
    from cluster.models import Job

    _, gpus, tenants = heartbeat.populate()
    active_set(gpus[0], tenants, args.pending)
    print(f"{len(gpus)} nodes; 20 running and {args.pending} pending jobs; no VACUUM")
    print(f"{'ended jobs':>10} {'statement':>14} {'exec ms':>8} {'pages':>7}")
    done = 0
    for size in sorted(set(args.ended)):
        heartbeat.end_jobs(size - done, done, gpus[1:], tenants)
        made = list(Job.objects.filter(name="ended").order_by("pk").values_list("pk", flat=True)[done:])
        history(made, ENDED_EVENTS, REQUEUE_EVENTS)
        done = size
        for name, (ms, pages) in measure(args.repeat).items():
            print(f"{size:>10,} {name:>14} {ms:>8.2f} {pages:>7,}")
        print(f"{size:>10,} {'snapshot CPU':>14} {snapshot_cpu_ms(args.repeat):>8.2f}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
