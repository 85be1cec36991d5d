"""Where a one-process live run's CPU goes: this process's CPU time per thread group, and the CPU
of the PostgreSQL backends serving its database, read from ``/proc`` (Linux, a server on this
machine). ``bench_kueue.py`` prints them as CPU per job by component.

Thread groups are the threads' names without a trailing ``-<suffix>`` (``demo-web-3`` →
``demo-web``, ``demo-agent-node-07`` → ``demo-agent``), so the web service's workers, the fleet's
agents, the rounds and the replay each get one figure.

Units: seconds (s) of CPU, user + system.
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from pathlib import Path


def _stat_cpu_s(path: Path) -> float | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) ": state is fields[0]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def group_of(name: str) -> str:
    """A thread's group: ``demo-web-3`` → ``demo-web``, ``demo-agent-node-07`` → ``demo-agent``,
    ``rounds`` → ``rounds``."""
    parts = name.split("-")
    if len(parts) > 2:
        return "-".join(parts[:2])
    if len(parts) == 2 and parts[1].isdigit():
        return parts[0]
    return name


def thread_cpu_s() -> dict[str, float]:
    """CPU (s) of this process's live threads so far, summed per :func:`group_of` their name;
    threads already ended are not counted (``{}`` where ``/proc`` cannot be read)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    totals: dict[str, float] = defaultdict(float)
    for tid, name in names.items():
        cpu = _stat_cpu_s(Path(f"/proc/self/task/{tid}/stat"))
        if cpu is not None:
            totals[group_of(name)] += cpu
    return dict(totals)


def postgres_cpu_s() -> float | None:
    """CPU (s) so far of the PostgreSQL backends connected to Django's database now (``None`` on
    SQLite or where ``/proc`` cannot be read: a server elsewhere); backends whose connection
    closed earlier are not counted."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        pids = [row[0] for row in cursor.fetchall()]
    times = [_stat_cpu_s(Path(f"/proc/{pid}/stat")) for pid in pids]
    known = [t for t in times if t is not None]
    return sum(known) if known else None


if __name__ == "__main__":  # a module the benchmarks import: run, it says so (and answers --help)
    from cli_args import module_only

    raise SystemExit(module_only(__file__, __doc__))
