"""CPU of one single-job ``POST /api/v1/jobs/`` in one process, with a change of the submission
path on and off in alternating blocks (docs/PERFORMANCE.md §8).

What it does: recreates the PostgreSQL database of ``--database-url`` (default
``sharewise_bench_post``), migrates it, registers a 4x8-GPU cluster and one tenant, points the
cache at the Redis of ``--cache-url`` (a spare database: the run's keys are left there to
expire) with production's backend, then calls the WSGI application in a loop (no
HTTP, no server; the throttle and the pending cap raised out of the way), ``--blocks`` pairs of
blocks of ``--posts`` POSTs, the change on and off in turn (the order alternates pair by pair:
the machine's speed drifts). Prints the machine, the median CPU time (``time.process_time``, ms)
of a POST each way, the median of the pairs' ratios (on / off), and the CPU time (µs) of the
part the change touches called alone after each block (steadier than a whole POST: the change
is a few per cent of one).

``--compare`` names the change:

- ``one-read``: the token's row and the cluster's facts read from Redis by one ``MGET``
  (:func:`cluster.cache_reads.read_together`) against a ``GET`` each;
- ``class-cache``: the answer's learned classes kept per process
  (``SHAREWISE_CLASS_CACHE_S=1``) against read for every POST (``0``).

Not a test: nothing is asserted.

Run: ``python benchmarks/bench_post.py --compare one-read|class-cache [--posts 300]
[--blocks 10]
[--database-url postgres://postgres@127.0.0.1:5432/sharewise_bench_post]
[--cache-url redis://127.0.0.1:6379/12]``
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from cli_args import database_url, positive_int, redis_url  # benchmarks/cli_args.py
from fresh_db import setup_django  # benchmarks/fresh_db.py
from machine import machine  # benchmarks/machine.py

BODY = json.dumps(
    {"name": "bench-job", "model": "resnet50", "batch_size": 128, "iterations": 1000, "gpus": 4}
).encode()
#: The settings of the run (before Django is set up): no throttle or cap in the way, quiet logs.
ENVIRONMENT = {
    "SHAREWISE_SUBMIT_RATE": "1000000/s",
    "SHAREWISE_MAX_PENDING_PER_TENANT": "100000000",
    "DEBUG": "0",
    "LOG_LEVEL": "WARNING",
    "CONN_MAX_AGE": "600",
    "SHAREWISE_HEARTBEAT_TIMEOUT_S": "86400",  # the registered nodes stay schedulable (no agents)
}


def switch_one_read(on: bool) -> None:
    """The token's row and the cluster's facts read by one ``get_many`` (``on``) or by a
    ``cache.get`` each (off: what the readers do without a getter read ahead)."""
    from django.core.cache import cache

    from cluster import fast_submit

    kept = switch_one_read.__dict__.setdefault("read", fast_submit.read_together)
    fast_submit.read_together = kept if on else (lambda keys: cache.get)  # type: ignore[assignment]


def one_read_part(token: str) -> Callable[[], object]:
    """The part ``one-read`` changes: the two entries read as the plain submission view reads
    them (the switch decides how)."""
    from cluster import cluster_facts, fast_submit, token_cache

    def read() -> object:
        get = fast_submit.read_together([token_cache.cache_key(token), cluster_facts.cache_key()])
        return token_cache.find_token(token, get), cluster_facts.current(get)

    return read


def switch_class_cache(on: bool) -> None:
    """The answer's learned classes kept per process for 1 s (``on``) or read for every POST
    (``SHAREWISE_CLASS_CACHE_S`` 0)."""
    from django.conf import settings

    settings.SHAREWISE_CLASS_CACHE_S = 1.0 if on else 0.0


def class_cache_part(token: str) -> Callable[[], object]:
    """The part ``class-cache`` changes: the newest job's estimate as its answer asks for it."""
    from cluster.models import Job
    from scheduling import service

    job = Job.objects.order_by("-pk").first()
    assert job is not None
    return lambda: service.job_estimates([job], new=True)


#: The changes ``--compare`` can name: a switch that turns the change on (``True``) or off, and
#: what builds a call of the part it changes alone.
SWITCHES: dict[str, tuple[Callable[[bool], None], Callable[[str], Callable[[], object]]]] = {
    "one-read": (switch_one_read, one_read_part),
    "class-cache": (switch_class_cache, class_cache_part),
}


def part_us(call: Callable[[], object], calls: int = 2000) -> float:
    """CPU time (µs) of one ``call()``, the mean of ``calls``."""
    start = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - start) / calls * 1e6


def poster(token: str) -> Callable[[], str]:
    """A function that POSTs :data:`BODY` through the WSGI application and returns the status."""
    from django.core.handlers.wsgi import WSGIHandler

    app = WSGIHandler()
    statuses: list[str] = []

    def start_response(status: str, headers: Any, exc: Any = None) -> None:
        statuses.append(status)

    def post() -> str:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/api/v1/jobs/",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(BODY)),
            "HTTP_AUTHORIZATION": f"Token {token}",
            "HTTP_HOST": "127.0.0.1:8000",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.input": io.BytesIO(BODY),
            "wsgi.url_scheme": "http",
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        answer = app(environ, start_response)
        b"".join(answer)
        answer.close()  # type: ignore[attr-defined]
        return statuses.pop()

    return post


def block_ms(post: Callable[[], str], posts: int) -> float:
    """CPU time (ms) of one POST, the mean of ``posts`` (after a few untimed ones)."""
    for _ in range(20):
        post()
    start = time.process_time()
    for _ in range(posts):
        status = post()
    if not status.startswith("201"):
        sys.exit(f"a POST was answered {status}, not 201")
    return (time.process_time() - start) / posts * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--compare", choices=sorted(SWITCHES), required=True, help="the change timed on and off"
    )
    parser.add_argument("--posts", type=positive_int, default=300, help="POSTs per block (300)")
    parser.add_argument("--blocks", type=positive_int, default=10, help="pairs of blocks, on and off (10)")
    parser.add_argument(
        "--database-url",
        type=database_url,
        default="postgres://postgres@127.0.0.1:5432/sharewise_bench_post",
        help="PostgreSQL database to recreate (postgres://postgres@127.0.0.1:5432/sharewise_bench_post)",
    )
    parser.add_argument(
        "--cache-url",
        type=redis_url,
        default="redis://127.0.0.1:6379/12",
        help="a spare Redis database (redis://127.0.0.1:6379/12)",
    )
    args = parser.parse_args()
    os.environ.update(ENVIRONMENT)
    os.environ["CACHE_URL"] = args.cache_url
    setup_django(args.database_url)
    from cluster.models import Node, Tenant

    for i in range(4):
        Node.register(f"bench-node-{i}", 8, 80_000, "a100")
    _, token = Tenant.create_with_owner("bench", quota_gpus=8, username="bench-owner")
    post = poster(token)
    switch, part = SWITCHES[args.compare]
    times: dict[bool, list[float]] = {True: [], False: []}
    alone: dict[bool, list[float]] = {True: [], False: []}
    for pair in range(args.blocks):
        for on in (True, False) if pair % 2 else (False, True):
            switch(on)
            times[on].append(block_ms(post, args.posts))
            alone[on].append(part_us(part(token)))
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}")
    print(f"--compare {args.compare}: CPU ms per POST, {args.blocks} pairs of blocks of {args.posts}:")
    for on, label in ((False, "off"), (True, "on")):
        values = times[on]
        print(f"  {label:<4} median {statistics.median(values):.3f}  min {min(values):.3f}")
    ratios = [a / b for a, b in zip(times[True], times[False], strict=True)]
    print(f"  on / off, median of the pairs' ratios: {statistics.median(ratios):.3f}")
    print("the part it changes alone, CPU us per call (2000 calls after each block):")
    for on, label in ((False, "off"), (True, "on")):
        print(f"  {label:<4} median {statistics.median(alone[on]):.1f}  min {min(alone[on]):.1f}")


if __name__ == "__main__":
    main()
