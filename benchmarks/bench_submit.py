"""Job submissions per second over HTTP: gunicorn + PostgreSQL, load from ``wrk`` on loopback.

What it does: (re)creates a PostgreSQL database (default ``sharewise_bench``), migrates it,
registers a 4x8-GPU cluster and one tenant, starts gunicorn (gthread workers, keep-alive) with
the submission throttle raised out of the way, then drives ``POST /api/v1/jobs/`` with ``wrk``
(C, one connection per simulated client, keep-alive) for a fixed duration and prints sustained
submissions/s, latency percentiles (p50/p90/p99, from wrk), errors, the jobs actually in the
database, and the CPU time each program used per request (from ``/proc``), which says what
bounds the rate. Without ``wrk`` a Python load client (threads, ``http.client`` keep-alive) is
used instead; it competes for the same cores, so its numbers are lower.

``--bulk N`` sends ``N`` jobs per request to ``POST /api/v1/jobs/bulk/`` instead (jobs/s =
requests/s × N; the latency is a whole request's); with ``--idempotency-keys`` each job carries its
own key (Python client only).

Not a test: nothing is asserted. Target (issue 16): >= 1,000 submissions/s with p99 < 50 ms on
2 cores.

``--rounds S`` runs ``manage.py run_scheduler --interval S`` beside the load (rounds while
submissions arrive, as issue 16 asks); its CPU shows under ``python``.

Run: ``python benchmarks/bench_submit.py [--duration 20] [--connections 16] [--workers 2]
[--threads 4] [--worker-class sync] [--idempotency-keys] [--bulk 100] [--rounds 1] [--database-url postgres://postgres@127.0.0.1:5432/sharewise_bench]``
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit

from cli_args import database_url, non_negative_int, positive_int  # benchmarks/cli_args.py
from fresh_db import recreate_postgres  # benchmarks/fresh_db.py
from machine import machine  # benchmarks/machine.py

REPO = Path(__file__).resolve().parent.parent
BODY = {"name": "bench-job", "model": "resnet50", "batch_size": 128, "iterations": 1000, "gpus": 4}
CLK_TCK = os.sysconf("SC_CLK_TCK")

WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = [[%(body)s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Token %(token)s"
local counter = 0
request = function()
  if %(keys)s then
    counter = counter + 1
    wrk.headers["Idempotency-Key"] = "bench-" .. tostring(math.random(1, 1e9)) .. "-" .. counter
  end
  return wrk.format()
end
"""


def cpu_seconds_by_program() -> dict[str, float]:
    """CPU time (user + system, s) used so far by live processes, summed per program name."""
    totals: dict[str, float] = defaultdict(float)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        totals[name] += (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    return totals


def cpu_seconds_of(pid: int) -> float:
    """CPU time (user + system, s) used so far by process ``pid`` (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (gunicorn's workers)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def database_backends(url: str) -> list[int]:
    """PIDs of the PostgreSQL backends connected to the database of ``url`` now (this benchmark's
    gunicorn workers and rounds: the database is its own)."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [name]).fetchall()
    return [pid for (pid,) in rows]


def own_cpu(groups: dict[str, list[int]]) -> dict[str, float]:
    """CPU time (s) used so far by each group of PIDs."""
    return {label: sum(cpu_seconds_of(pid) for pid in pids) for label, pids in groups.items()}


def manage(env: dict[str, str], *args: str) -> str:
    """Run ``manage.py`` with ``env``; return stdout; exit with its stderr on failure."""
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        sys.exit(f"manage.py {' '.join(args)} failed:\n{result.stderr}")
    return result.stdout.strip()


def start_gunicorn(
    env: dict[str, str], port: int, workers: int, threads: int, worker_class: str = "gthread"
) -> subprocess.Popen:
    """Start gunicorn on 127.0.0.1:``port`` (``worker_class``: ``gthread``, keep-alive, or
    ``sync``, a connection closed after each answer) and wait until /healthz answers (exits
    after 30 s)."""
    gunicorn = shutil.which("gunicorn", path=str(Path(sys.executable).parent)) or "gunicorn"
    cmd = [
        gunicorn, "config.wsgi", "--bind", f"127.0.0.1:{port}", "--worker-class", worker_class,
        "--workers", str(workers), "--threads", str(threads), "--keep-alive", "30", "--log-level", "warning",
    ]  # fmt: skip
    # the server's log is kept only when it did not become ready (the reason is in it)
    log = tempfile.NamedTemporaryFile("w", prefix="bench_submit_gunicorn_", suffix=".log", delete=False)
    server = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as response:
                if response.status == 200:
                    log.close()
                    os.unlink(log.name)
                    return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    sys.exit(f"gunicorn did not become ready within 30 s; see {log.name}")


def check_cache(url: str) -> None:
    """Exit with one line when the throttle cache at ``url`` (``redis://``) does not answer: the
    server would only say so in its log, after the 30 s readiness wait."""
    if not url.startswith(("redis://", "rediss://")):
        return
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2).ping()
    except (redis.RedisError, ValueError) as exc:
        sys.exit(f"--cache-url {url}: the cache does not answer: {exc}")


def check_accepted(port: int, token: str, args: argparse.Namespace) -> None:
    """Send one request as the load will and exit with the server's answer in one line when it
    is refused (e.g. ``--bulk`` above the endpoint's limit): a rate of refused requests is no
    submission rate."""
    path, body = request_of(args, "bench-check" if args.idempotency_keys and args.bulk else None)
    headers = {"Content-Type": "application/json", "Authorization": f"Token {token}"}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        try:
            conn.request("POST", path, body, headers)
        except BrokenPipeError:  # the server answered (413) and closed before taking the whole body
            pass
        response = conn.getresponse()
        answer = response.read()[:300].decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        sys.exit(f"the server did not answer the benchmark's request ({path}): {exc}")
    finally:
        conn.close()
    if response.status >= 300:
        sys.exit(f"the server refused the benchmark's request ({path}): HTTP {response.status} {answer}")


def request_of(args: argparse.Namespace, keys: str | None = None) -> tuple[str, bytes]:
    """The path and JSON body of one submission request: one job, or ``--bulk`` jobs (each with
    the key ``{keys}-{k}`` when ``keys`` is given)."""
    if not args.bulk:
        return "/api/v1/jobs/", json.dumps(BODY).encode()
    jobs = [BODY if keys is None else {**BODY, "idempotency_key": f"{keys}-{k}"} for k in range(args.bulk)]
    return "/api/v1/jobs/bulk/", json.dumps({"jobs": jobs}).encode()


def run_wrk(port: int, token: str, args: argparse.Namespace) -> dict[str, float]:
    """Drive the server with wrk; return throughput (1/s), latency percentiles (ms), errors."""
    path, body = request_of(args)
    script = WRK_SCRIPT % {
        "body": body.decode(),
        "token": token,
        "keys": str(args.idempotency_keys and not args.bulk).lower(),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    target = ["-s", handle.name, f"http://127.0.0.1:{port}{path}"]
    if getattr(args, "healthz", False):  # the no-database baseline: GET /healthz
        target = [f"http://127.0.0.1:{port}/healthz"]
    cmd = [
        "wrk", "-t", str(args.load_threads), "-c", str(args.connections), "-d", f"{args.duration}s",
        "--latency", "--timeout", "30s", *target,  # wrk's 2 s default drops slow bulk answers
    ]  # fmt: skip
    output = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    os.unlink(handle.name)
    if args.verbose:
        print(output)

    def ms(label: str) -> float:
        value, unit = re.search(rf"^\s+{label}\s+([\d.]+)(us|ms|s)\s*$", output, re.M).groups()
        return float(value) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[unit]

    completed = int(re.search(r"(\d+) requests in", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    socket_errors = re.search(r"Socket errors: (.+)", output)
    return {
        "requests": completed,
        "rate": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50": ms("50%"),
        "p90": ms("90%"),
        "p99": ms("99%"),
        "errors": int(errors.group(1)) if errors else 0,
        "socket_errors": socket_errors.group(1) if socket_errors else "none",
    }


def run_python_client(port: int, token: str, args: argparse.Namespace) -> dict[str, float]:
    """Fallback load client: one thread per connection, ``http.client`` keep-alive."""
    latencies: list[list[float]] = [[] for _ in range(args.connections)]
    errors = [0] * args.connections
    path, body = request_of(args)
    stop_at = time.monotonic() + args.duration

    def client(i: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            headers = {"Content-Type": "application/json", "Authorization": f"Token {token}"}
            data = body
            if args.idempotency_keys and args.bulk:
                data = request_of(args, f"bench-{i}-{n}")[1]
            elif args.idempotency_keys:
                headers["Idempotency-Key"] = f"bench-{i}-{n}"
            start = time.perf_counter()
            conn.request("POST", path, data, headers)
            response = conn.getresponse()
            response.read()
            latencies[i].append((time.perf_counter() - start) * 1e3)
            errors[i] += response.status >= 300

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.connections)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    every = sorted(x for per in latencies for x in per)
    if len(every) < 2:
        sys.exit(f"only {len(every)} request(s) answered in {args.duration} s: no percentiles")
    cuts = statistics.quantiles(every, n=100)
    return {
        "requests": len(every), "rate": len(every) / elapsed, "errors": sum(errors), "socket_errors": "n/a",
        "p50": cuts[49], "p90": cuts[89], "p99": cuts[98],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        type=database_url,
        default="postgres://postgres@127.0.0.1:5432/sharewise_bench",
        help="PostgreSQL database to drop and recreate (default: sharewise_bench on 127.0.0.1)",
    )
    parser.add_argument("--cache-url", default="redis://127.0.0.1:6379/15", help="throttle counters (shared)")
    parser.add_argument("--duration", type=positive_int, default=20, help="seconds of load (20)")
    parser.add_argument(
        "--warmup", type=non_negative_int, default=3, help="seconds of load before measuring (3)"
    )
    parser.add_argument(
        "--connections", type=positive_int, default=16, help="concurrent keep-alive connections (16)"
    )
    parser.add_argument("--load-threads", type=positive_int, default=1, help="wrk threads (1)")
    parser.add_argument("--workers", type=positive_int, default=2, help="gunicorn worker processes (2)")
    parser.add_argument("--threads", type=positive_int, default=4, help="threads per gunicorn worker (4)")
    parser.add_argument(
        "--worker-class",
        choices=("gthread", "sync"),
        default="gthread",
        help="gunicorn's worker class: gthread (the deployment's, keep-alive) or sync (one request "
        "at a time, the connection closed after it; --threads does not apply)",
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--idempotency-keys", action="store_true", help="send a fresh Idempotency-Key each time"
    )
    parser.add_argument(
        "--python-client", action="store_true", help="use the Python client even if wrk exists"
    )
    parser.add_argument("--baseline", action="store_true", help="also measure GET /healthz (no database)")
    parser.add_argument(
        "--bulk", type=positive_int, default=0, metavar="N", help="N jobs per request (bulk endpoint)"
    )
    parser.add_argument(
        "--rounds",
        type=float,
        default=0.0,
        metavar="S",
        help="also run scheduling rounds every S seconds during the load (manage.py run_scheduler)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    if not args.database_url.startswith("postgres"):
        parser.error("--database-url: the submission benchmark runs on PostgreSQL (postgres://...)")

    env = {
        **os.environ,
        "DATABASE_URL": args.database_url,
        "CACHE_URL": args.cache_url,
        "SHAREWISE_SUBMIT_RATE": "1000000/s",
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "CONN_MAX_AGE": "600",
        # the benchmark measures submissions, not the per-tenant cap on pending jobs
        "SHAREWISE_MAX_PENDING_PER_TENANT": "10000000",
        # no agents run: the nodes must not be marked silent (their GPUs would bound no gang)
        "SHAREWISE_HEARTBEAT_TIMEOUT_S": "86400",
    }
    check_cache(args.cache_url)
    recreate_postgres(args.database_url)
    manage(env, "migrate", "--noinput", "-v", "0")
    manage(env, "load_cluster", "4x8")
    token = manage(env, "create_tenant", "bench", "--quota-gpus", "8")

    use_wrk = shutil.which("wrk") is not None and not args.python_client
    client = run_wrk if use_wrk else run_python_client
    server = start_gunicorn(env, args.port, args.workers, args.threads, args.worker_class)
    scheduler = None
    if args.rounds:  # rounds compete with the submissions for the same cores and database
        scheduler = subprocess.Popen(
            [sys.executable, "manage.py", "run_scheduler", "--interval", str(args.rounds)],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        check_accepted(args.port, token, args)
        if args.warmup:
            client(args.port, token, argparse.Namespace(**{**vars(args), "duration": args.warmup}))
        load_before = f"{os.getloadavg()[0]:.2f}"
        # this benchmark's own processes, by PID: on a shared machine the per-name totals
        # (gunicorn, postgres) include other users' work
        groups = {
            "gunicorn (ours)": [server.pid, *children_of(server.pid)],
            "postgres (our backends)": database_backends(args.database_url),
        }
        if scheduler is not None:
            groups["run_scheduler (ours)"] = [scheduler.pid]
        before = cpu_seconds_by_program()
        own_before = own_cpu(groups)
        result = client(args.port, token, args)
        after = cpu_seconds_by_program()
        own_used = {k: v - own_before[k] for k, v in own_cpu(groups).items()}
        if use_wrk and args.baseline:
            baseline = run_wrk(args.port, token, argparse.Namespace(**{**vars(args), "healthz": True}))
    finally:
        for process in (scheduler, server):
            if process is not None:
                process.terminate()
                process.wait(timeout=30)
    rounds = ""
    if scheduler is not None:
        rounds = manage(
            env, "shell", "-v", "0", "-c",
            "from scheduling.models import Round; print(Round.objects.count())",
        )  # fmt: skip
    jobs = manage(env, "shell", "-v", "0", "-c", "from cluster.models import Job; print(Job.objects.count())")

    print(f"machine: {machine()}")
    served = (
        f"{args.workers} workers x {args.threads} threads (gthread, keep-alive)"
        if args.worker_class == "gthread"
        else f"{args.workers} sync workers (a connection closed after each answer)"
    )
    print(
        f"setup: gunicorn {served}, PostgreSQL, "
        f"throttle cache {args.cache_url}; load: {'wrk' if use_wrk else 'Python threads'}, "
        f"{args.connections} connections, {args.duration} s after {args.warmup} s warm-up"
        + (", fresh Idempotency-Key per request" if args.idempotency_keys else "")
        + (f"; rounds every {args.rounds:g} s beside ({rounds} recorded)" if scheduler is not None else "")
    )
    print(f"load average before/after: {load_before} / {os.getloadavg()[0]:.2f}")
    per = max(1, args.bulk)
    print(
        f"submissions/s: {result['rate'] * per:.0f} jobs/s  ({result['requests']} requests"
        + (f" of {per} jobs, {result['rate']:.0f} requests/s)" if args.bulk else ")")
    )
    print(f"latency ms: p50 {result['p50']:.1f}  p90 {result['p90']:.1f}  p99 {result['p99']:.1f}")
    print(f"non-2xx: {result['errors']}  socket errors: {result['socket_errors']}  jobs in database: {jobs}")
    if use_wrk and args.baseline:
        print(
            f"baseline GET /healthz (same server, no database): {baseline['rate']:.0f}/s, "
            f"p50 {baseline['p50']:.1f} ms, p99 {baseline['p99']:.1f} ms"
        )
    used = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    busy = sorted(((s, n) for n, s in used.items() if s > 0.05), reverse=True)[:6]
    total = sum(s for s, _ in busy)
    print(f"CPU used during the run: {total:.1f} s of {args.duration * (os.cpu_count() or 1)} core-seconds")
    for seconds, name in busy:
        print(f"  {name:<16} {seconds:6.1f} s  = {seconds / (result['requests'] * per) * 1e3:.2f} ms per job")
    print("  (per program name, machine-wide: includes any other process of that name)")
    print("this benchmark's own processes (by PID):")
    for label, seconds in own_used.items():
        print(
            f"  {label:<24} {seconds:6.2f} s  = {seconds / (result['requests'] * per) * 1e3:.2f} ms per job"
        )


if __name__ == "__main__":
    main()
