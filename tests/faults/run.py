"""The long fault campaign, run by a person (docs/HARDENING.md):

    DATABASE_URL=postgres://…/sharewise_faults REDIS_URL=redis://127.0.0.1:6379/4 \\
        python -m tests.faults.run --faults 120 --seed 1 --json var/faults.json

The database must be PostgreSQL and is emptied first (``--flush`` is required, so that no one
empties a database by mistake); the Redis database of ``REDIS_URL`` too. Prints the faults
injected, the jobs lost, the invariant breaks and the lost rounds; exit status 1 if any.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", type=int, default=120, help="faults to inject (default 120)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=1.0, help="job submissions per second (default 1)")
    parser.add_argument("--fleet", default="2x4", help="emulated nodes x GPUs (default 2x4)")
    parser.add_argument("--json", type=Path, help="write the report here as JSON")
    parser.add_argument(
        "--flush", action="store_true", help="empty DATABASE_URL and REDIS_URL's database first"
    )
    args = parser.parse_args(argv)
    database_url, redis_url = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not database_url.startswith(("postgres://", "postgresql://")) or not redis_url.startswith("redis://"):
        parser.error(
            "set DATABASE_URL=postgres://... and REDIS_URL=redis://... (the campaign's own databases)"
        )
    if not args.flush:
        parser.error("--flush is required: the campaign empties DATABASE_URL and the Redis database first")

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import redis
    from django.core.management import call_command

    from tests.faults.campaign import Campaign
    from tests.faults.deployment import Deployment, with_redis_db
    from tests.faults.proxy import CuttableProxy

    call_command("migrate", verbosity=0, interactive=False)
    call_command("flush", verbosity=0, interactive=False)
    parts = urlsplit(redis_url)
    db = int(parts.path.strip("/") or 0)
    redis.Redis.from_url(redis_url).flushdb()
    proxy = CuttableProxy((parts.hostname or "127.0.0.1", parts.port or 6379))
    with tempfile.TemporaryDirectory(prefix="sharewise-faults-") as tmp:
        deployment = Deployment(
            database_url, with_redis_db(redis_url, db, proxy.port), Path(tmp) / "tokens.json", Path(tmp),
            fleet=args.fleet,
        )  # fmt: skip
        campaign = Campaign(deployment, args.faults, seed=args.seed, rate_per_s=args.rate)
        try:
            report = campaign.run(proxy)
        finally:
            proxy.close()
            redis.Redis.from_url(redis_url).flushdb()
    print(report.summary())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(report.to_json())
    bad = report.jobs_lost or report.breaks or report.lost_rounds or report.server_errors
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
