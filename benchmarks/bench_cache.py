"""What the web process's Redis round trips cost it, per submission (docs/PERFORMANCE.md §8).

A single-job ``POST /api/v1/jobs/`` asks the shared cache twice: the token's row
(``cluster.token_cache.find_token``, a ``GET`` of a pickled row) and the per-tenant throttle's
count (``cluster.throttles.SubmissionThrottle``, an ``INCR``). This times that pair through
Django's cache, as the view calls it, against the Redis at ``--cache-url`` (the database number
given is written to: use a spare one), and says which reply parser redis-py uses: its own
pure-Python one, or ``hiredis`` (C) when that package is installed (requirements.txt pins it).

Prints the machine and, per parser (the pure-Python one, and ``hiredis``'s when installed, each
on its own connection pool, timed in alternating blocks), the median and minimum over
``--repeats`` blocks of the CPU time (``time.process_time``, µs) of one ``GET`` + ``INCR``, and
the median ratio of the paired blocks. Not a test: nothing is asserted.

Run: ``python benchmarks/bench_cache.py [--cache-url redis://127.0.0.1:6379/12] [--pairs 2000]
[--repeats 9]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cli_args import positive_int, redis_url  # noqa: E402  # benchmarks/cli_args.py
from machine import machine  # noqa: E402  # benchmarks/machine.py

#: Stands in for a cached token row: a pickled ApiToken with its user, membership and tenant is
#: about 960 bytes (the tests' fixtures), and this pickles to about 1,000.
ROW = {"user": {"id": 7, "username": "alice", "is_active": True}, "tenant": "team-a", "pad": "x" * 900}


def pair_cpu_us(cache: object, pairs: int) -> float:
    """CPU time (µs) of one ``cache.get`` of :data:`ROW`'s key and one ``cache.incr``, the mean of
    ``pairs``."""
    get, incr = cache.get, cache.incr  # type: ignore[attr-defined]
    start = time.process_time()
    for _ in range(pairs):
        get("sharewise:bench-cache:row")
        incr("sharewise:bench-cache:count")
    return (time.process_time() - start) / pairs * 1e6


def parser_paths(url: str) -> dict[str, str]:
    """The reply parsers to compare, by label: redis-py's pure-Python parser for the protocol a
    client of ``url`` speaks, and ``hiredis``'s when it is installed."""
    import redis
    from redis.utils import HIREDIS_AVAILABLE

    pool = redis.Redis.from_url(url).connection_pool
    protocol = int(pool.connection_kwargs.get("protocol") or 2)
    paths = {"pure Python": f"redis.connection._RESP{3 if protocol == 3 else 2}Parser"}
    if HIREDIS_AVAILABLE:
        paths["hiredis"] = "redis.connection._HiredisParser"
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache-url",
        type=redis_url,
        default="redis://127.0.0.1:6379/12",
        help="a spare Redis database (redis://127.0.0.1:6379/12)",
    )
    parser.add_argument("--pairs", type=positive_int, default=2000, help="GET + INCR pairs per block (2000)")
    parser.add_argument("--repeats", type=positive_int, default=9, help="blocks timed per parser (9)")
    args = parser.parse_args()
    os.environ["CACHE_URL"] = args.cache_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import redis
    from django.conf import settings
    from django.core.cache import cache
    from django.utils.module_loading import import_string

    try:
        cache.set("sharewise:bench-cache:row", ROW, 600)
        cache.set("sharewise:bench-cache:count", 0, 600)
    except redis.RedisError as exc:
        sys.exit(f"--cache-url {args.cache_url}: the cache does not answer: {exc}")
    params = settings.CACHES["default"]
    backend = import_string(params["BACKEND"])
    caches = {
        label: backend(
            params["LOCATION"], {**params, "OPTIONS": {**params.get("OPTIONS", {}), "parser_class": path}}
        )
        for label, path in parser_paths(args.cache_url).items()
    }
    blocks: dict[str, list[float]] = {label: [] for label in caches}
    for each in caches.values():
        pair_cpu_us(each, 300)  # warm: the connection made, the code paths loaded
    for _ in range(args.repeats):  # interleaved block by block: the machine's speed drifts
        for label, each in caches.items():
            blocks[label].append(pair_cpu_us(each, args.pairs))
    cache.delete_many(["sharewise:bench-cache:row", "sharewise:bench-cache:count"])
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}; redis-py {redis.__version__}")
    print(
        f"one GET + INCR through Django's cache, CPU (us), {args.repeats} interleaved blocks of {args.pairs}:"
    )
    for label, values in blocks.items():
        print(f"  {label:<12} median {statistics.median(values):6.1f}  min {min(values):6.1f}")
    if len(blocks) == 2:
        ratios = [h / p for p, h in zip(blocks["pure Python"], blocks["hiredis"], strict=True)]
        print(f"  hiredis / pure Python, median of the blocks' ratios: {statistics.median(ratios):.2f}")
    else:
        print("  (hiredis is not installed: pip install -r requirements.txt)")


if __name__ == "__main__":
    main()
