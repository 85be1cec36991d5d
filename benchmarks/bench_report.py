"""What each item of an agent's batch report costs the service: statements and CPU per job event,
output chunk, heartbeat and orders fetch (docs/PERFORMANCE.md §10).

What it does: creates a fresh database (the PostgreSQL database named by ``--database-url``,
dropped and recreated; default: a temporary SQLite file), migrates it, registers the
Kueue-shaped cluster (30 nodes × 20 GPUs, 30 tenants: benchmarks/kueue_shape.py) and places one
1-GPU job of 10 iterations on every GPU with one round (``fifo``). Then every node sends, through
Django's test client (``POST /api/v1/agent/batch/``, the agent's real request), the reports the
demo's emulated fleet sends for a job's life, as they were captured from a ``bench_kueue.py``
run: a first heartbeat (it declares the node's executor), its first output chunk and its
``started`` (no iteration time yet), a heartbeat listing the node's running jobs, its
``finished`` (iteration time 0.02 s) with its last chunk (``eof``), and an orders fetch.
For half of each node's jobs each kind of item goes alone in its report of ``--per-report``
items (so each kind is measured apart), for the other half as the fleet
combines them (chunks and events in one report, the last with the heartbeat).

It prints the machine and load, then per report kind the medians over the 30 nodes of this
thread's CPU (``time.thread_time``) and of the statements it sent (counted by a
``connection.execute_wrapper``: savepoints count, PostgreSQL's implicit BEGIN and the
COMMIT do not), per report and per item, and a job's share: a ``started`` and a
``finished`` with their two chunks, plus half a heartbeat (the ratio of heartbeats to finished
jobs of the 1,500-job ``bench_kueue.py`` run).

Not a test: nothing is asserted.

Run: ``python benchmarks/bench_report.py [--database-url postgres://…] [--per-report 5]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the project's packages, for kueue_shape

import kueue_shape as shape  # noqa: E402  # benchmarks/kueue_shape.py
from cli_args import database_url, positive_int  # noqa: E402  # benchmarks/cli_args.py
from fresh_db import setup_django  # noqa: E402  # benchmarks/fresh_db.py
from machine import machine  # noqa: E402  # benchmarks/machine.py

BATCH_URL = "/api/v1/agent/batch/"
#: Iterations of every job (the short jobs' count in the captured reports).
ITERATIONS = 10
#: Heartbeats per finished job in the 1,500-job ``bench_kueue.py`` run (about 750 for 1,500).
HEARTBEATS_PER_JOB = 0.5


def populate() -> dict[str, str]:
    """The scenario's nodes and tenants, and one running job on every GPU (one ``fifo`` round);
    node name → its agent token."""
    from cluster.models import Job, Node, Tenant
    from common.shapes import node_names
    from scheduling import service

    tokens = {}
    for name in node_names(shape.NODES):
        tokens[name] = Node.register(name, shape.GPUS_PER_NODE, 49_140, "v100")[1]
    tenants = [
        Tenant.create_with_owner(name, quota_gpus=shape.NOMINAL_GPUS, borrow_limit=shape.BORROW_LIMIT_GPUS)[0]
        for name in shape.tenant_names()
    ]
    Job.objects.bulk_create(
        Job(
            tenant=tenants[k % len(tenants)],
            name=f"job-{k}",
            model=shape.MODEL,
            batch_size=64,
            iterations=ITERATIONS,
            gpus=1,
        )
        for k in range(shape.NODES * shape.GPUS_PER_NODE)
    )
    service.set_dispatcher(lambda messages: None)  # no agents: the reports below stand for them
    service.run_round(policy="fifo")
    return tokens


def node_jobs() -> dict[str, list[tuple[int, int]]]:
    """Node name → its jobs' (id, generation), by id."""
    from cluster.models import Placement

    jobs: dict[str, list[tuple[int, int]]] = defaultdict(list)
    rows = Placement.objects.filter(active=True).order_by("job_id")
    for job_id, generation, node in rows.values_list("job_id", "generation", "gpu__node__name"):
        jobs[node].append((job_id, generation))
    return jobs


def event(job: tuple[int, int], kind: str) -> dict[str, Any]:
    """A ``started`` or ``finished`` event of ``job`` as the emulated agent sends it."""
    done, measured = (0, None) if kind == "started" else (ITERATIONS, 0.02)
    return {
        "job_id": job[0],
        "generation": job[1],
        "event": kind,
        "iterations_done": done,
        "iter_time_s": measured,
        "reason": "",
        "memory_mb": None,
        "failure_kind": "",
    }


def chunk(node: str, job: tuple[int, int], last: bool) -> dict[str, Any]:
    """The run's first output chunk of ``job``, or its last (``eof``), as the emulated agent's."""
    first = f"emulated {shape.MODEL}: {ITERATIONS} iterations from 0\n"
    if not last:
        return {"job_id": job[0], "run": f"{node}/g{job[1]}", "offset": 0, "data": first, "eof": False}
    line = f"SHAREWISE_PROGRESS iterations_done={ITERATIONS} iter_time_s=0.02\n"
    return {"job_id": job[0], "run": f"{node}/g{job[1]}", "offset": len(first), "data": line, "eof": True}


def heartbeat(node: str, running: list[tuple[int, int]], done: float) -> dict[str, Any]:
    """``node``'s heartbeat listing ``running`` at ``done`` iterations each."""
    gpus = [
        {"index": i, "uuid": f"declared-{node}-{i}", "memory_mb": 49_140, "healthy": True}
        for i in range(shape.GPUS_PER_NODE)
    ]
    return {
        "gpus": gpus,
        "running": [{"job_id": j, "generation": g, "iterations_done": done} for j, g in running],
        "executor": "emulated",
        "report_latency_s": 0.3,
    }


def reports(node: str, jobs: list[tuple[int, int]], per: int) -> list[tuple[str, int, dict[str, Any]]]:
    """The reports of ``node`` in the order sent: (kind, items, body) (module docstring)."""
    half, rest = jobs[: len(jobs) // 2], jobs[len(jobs) // 2 :]
    out: list[tuple[str, int, dict[str, Any]]] = []

    def send(kind: str, items: int, **body: Any) -> None:
        out.append((kind, items, {"node": node, "logs": [], "events": [], "heartbeat": None, **body}))

    send("first heartbeat", 0, heartbeat=heartbeat(node, jobs, 0))  # declares the executor
    for k in range(0, len(half), per):
        group = half[k : k + per]
        send("first chunks", len(group), logs=[chunk(node, j, False) for j in group])
        send("started", len(group), events=[event(j, "started") for j in group])
    for k in range(0, len(rest), per):
        group = rest[k : k + per]
        send(
            "started + first chunks",
            2 * len(group),
            logs=[chunk(node, j, False) for j in group],
            events=[event(j, "started") for j in group],
        )
    send("heartbeat alone", 0, heartbeat=heartbeat(node, jobs, 5))
    send("orders fetch", 0, after=0)
    for k in range(0, len(half), per):
        group = half[k : k + per]
        send("finished", len(group), events=[event(j, "finished") for j in group])
        send("last chunks", len(group), logs=[chunk(node, j, True) for j in group])
    running = list(rest)
    for k in range(0, len(rest), per):
        group = rest[k : k + per]
        running = running[len(group) :]
        send(
            "finished + last chunks + heartbeat",
            2 * len(group),
            logs=[chunk(node, j, True) for j in group],
            events=[event(j, "finished") for j in group],
            heartbeat=heartbeat(node, running, 5),
        )
    return out


def measure(tokens: dict[str, str], per: int) -> dict[str, tuple[int, list[float], list[int]]]:
    """Send every node's :func:`reports`; per kind: (items a report, CPU s of each, statements
    of each). Exits with a line for a report refused or an item not applied."""
    from django.db import connection
    from rest_framework.test import APIClient

    sent = [0]

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent[0] += 1
        return execute(sql, params, many, context)

    seen: dict[str, tuple[int, list[float], list[int]]] = {}
    for node, jobs in sorted(node_jobs().items()):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Node {tokens[node]}")
        for kind, items, body in reports(node, jobs, per):
            sent[0] = 0
            c0 = time.thread_time()
            with connection.execute_wrapper(count):
                answer = client.post(BATCH_URL, body, format="json")
            cpu = time.thread_time() - c0
            if answer.status_code != 200:
                sys.exit(f"{kind} refused: {answer.status_code} {answer.content[:200]!r}")
            codes = [i["code"] for i in answer.json()["events"] + answer.json()["logs"]]
            if any(c != 200 for c in codes):
                sys.exit(f"{kind}: an item was refused: {answer.content[:300]!r}")
            entry = seen.setdefault(kind, (items, [], []))
            entry[1].append(cpu)
            entry[2].append(sent[0])
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        type=database_url,
        default=None,
        help="database to (re)create (default: temp SQLite)",
    )
    parser.add_argument(
        "--per-report", type=positive_int, default=5, help="jobs whose items go in one report (5)"
    )
    args = parser.parse_args()
    url = args.database_url or f"sqlite:///{tempfile.mkdtemp(prefix='sharewise-bench-')}/report.sqlite3"
    print(machine())
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    setup_django(url)
    from django.test.utils import setup_test_environment

    setup_test_environment(debug=False)  # the test client's host is allowed
    tokens = populate()
    measure(tokens, args.per_report)  # warm: caches, compiled SQL, the connection
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)
    tokens = populate()
    seen = measure(tokens, args.per_report)
    print(
        f"{'PostgreSQL' if url.startswith('postgres') else 'SQLite'}; {shape.NODES} nodes x "
        f"{shape.GPUS_PER_NODE} jobs; {args.per_report} jobs a report; medians over the nodes' reports"
    )
    print(f"{'report':<36} {'items':>5} {'CPU ms':>7} {'stmts':>6} {'CPU/item':>8} {'stmts/item':>10}")
    per_item: dict[str, tuple[float, float]] = {}
    for kind, (items, cpus, counts) in seen.items():
        cpu, count = 1000 * statistics.median(cpus), statistics.median(counts)
        per_item[kind] = (cpu / max(items, 1), count / max(items, 1)) if items else (cpu, count)
        each = per_item[kind]
        print(f"{kind:<36} {items:>5} {cpu:>7.2f} {count:>6.0f} {each[0]:>8.2f} {each[1]:>10.1f}")
    # a job: its started and finished with their chunks, and its share of the heartbeats
    parts = ("first chunks", "started", "finished", "last chunks")
    job_cpu = sum(per_item[k][0] for k in parts) + HEARTBEATS_PER_JOB * per_item["heartbeat alone"][0]
    job_st = sum(per_item[k][1] for k in parts) + HEARTBEATS_PER_JOB * per_item["heartbeat alone"][1]
    print(
        f"a job (started, finished, two chunks, {HEARTBEATS_PER_JOB:g} heartbeat): "
        f"{job_cpu:.2f} ms of CPU, {job_st:.1f} statements"
    )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
