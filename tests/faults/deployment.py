"""The deployment a fault campaign attacks: the Procfile's processes on loopback.

``web`` (gunicorn, ``SHAREWISE_ENV=production``), ``worker`` (the Celery round worker of
``tests.integration.worker``, with a short visibility timeout so a killed round is redelivered),
``beat`` (Celery beat: a round every second, the heartbeat check every half second), ``agents``
(``python -m agent --fleet``, emulated jobs 20x faster than job time). Redis (broker and cache)
is reached through a :class:`~tests.faults.proxy.CuttableProxy`; the database is the one the
caller's Django process uses. Every process runs in its own process group, its output in
``log_dir/<name>-<n>.log``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Timing:
    """The deployment's clocks (s): short, so that a fault is noticed and repaired in seconds."""

    heartbeat_s: float = 0.5
    heartbeat_timeout_s: float = 5.0
    round_interval_s: float = 1.0
    visibility_s: float = 8.0
    speedup: float = 20.0
    starvation_bound_s: float = 20.0


def with_redis_db(url: str, db: int, port: int | None = None) -> str:
    """``url`` with database ``db`` (and, given, port ``port`` on 127.0.0.1)."""
    parts = urlsplit(url)
    netloc = parts.netloc if port is None else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{db}"))


@dataclass
class Deployment:
    """Starts, kills and restarts the processes. ``database_url``: the database all of them use;
    ``redis_url``: the proxied Redis (``redis://127.0.0.1:<proxy port>/<db>``)."""

    database_url: str
    redis_url: str
    token_file: Path
    log_dir: Path
    fleet: str = "2x4"
    fleet_prefix: str = "fx"
    timing: Timing = field(default_factory=Timing)
    port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(50))

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **extra: str) -> dict[str, str]:
        t = self.timing
        env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "CACHE_URL": self.redis_url,
            "SHAREWISE_ENV": "production",
            "SECRET_KEY": self.secret_key,
            "DEBUG": "0",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "SHAREWISE_REQUIRE_SERVICES": "0",
            "SHAREWISE_POLICY": "sjf-bsbf-fair",
            "SHAREWISE_STARVATION_BOUND_S": str(t.starvation_bound_s),
            # aging in seconds, not the default hour: a long job is not overtaken for long
            "SHAREWISE_AGING_S": "10",
            "SHAREWISE_ROUND_INTERVAL_S": str(t.round_interval_s),
            "SHAREWISE_ROUND_DEBOUNCE_S": "0.5",
            "SHAREWISE_HEARTBEAT_TIMEOUT_S": str(t.heartbeat_timeout_s),
            "SHAREWISE_HEARTBEAT_INTERVAL_S": str(t.heartbeat_s),
            "SHAREWISE_SUBMIT_RATE": "100000/s",
            "CONN_MAX_AGE": "0",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        env.update(extra)
        return env

    def command(self, name: str) -> list[str]:
        t = self.timing
        py = sys.executable
        if name == "web":
            return [
                py, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{self.port}",
                "--worker-class", "gthread", "--workers", "1", "--threads", "8", "--log-level", "warning",
                "--timeout", "60",
            ]  # fmt: skip
        if name == "worker":
            return [py, "-m", "tests.integration.worker"]
        if name == "beat":
            schedule = self.log_dir / f"beat-schedule-{self.starts.get(name, 0)}"
            return [
                py,
                "-m",
                "celery",
                "-A",
                "config",
                "beat",
                "--schedule",
                str(schedule),
                "--loglevel",
                "WARNING",
            ]
        if name == "agents":
            return [
                py, "-m", "agent", "--fleet", self.fleet, "--node", self.fleet_prefix, "--api", self.api,
                "--token-file", str(self.token_file), "--broker", self.redis_url, "--speedup", str(t.speedup),
                "--heartbeat-s", str(t.heartbeat_s), "--progress-s", str(t.heartbeat_s), "--tick-s", "0.1",
                "--log-level", "WARNING",
            ]  # fmt: skip
        raise ValueError(name)

    def start(self, name: str, **env: str) -> subprocess.Popen:
        """Start process ``name`` (web, worker, beat, agents); ``env`` overrides its environment."""
        args = self.command(name)
        extra = {"SHAREWISE_TEST_VISIBILITY_S": str(self.timing.visibility_s)} if name == "worker" else {}
        n = self.starts.get(name, 0)
        self.starts[name] = n + 1
        log = (self.log_dir / f"{name}-{n}.log").open("w")
        proc = subprocess.Popen(
            args,
            cwd=REPO,
            env=self.env(**extra, **env),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def kill(self, name: str) -> None:
        """SIGKILL process ``name``'s whole group and reap it (no-op when not running)."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def restart(self, name: str, **env: str) -> subprocess.Popen:
        self.kill(name)
        return self.start(name, **env)

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def start_all(self) -> None:
        for name in ("web", "worker", "beat", "agents"):
            self.start(name)
        self.wait_web()

    def stop_all(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    def wait_web(self, timeout_s: float = 90.0) -> None:
        """Until ``/readyz`` answers 200 (the web process is up and reaches its services)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive("web"):
                raise RuntimeError(f"the web process exited:\n{self.logs('web')[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.api}/readyz", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the web process did not become ready in {timeout_s} s")

    def wait_web_alive(self, timeout_s: float = 90.0) -> None:
        """Until ``/healthz`` answers (the process serves, whatever its services)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.api}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the web process did not answer /healthz in {timeout_s} s")

    def logs(self, name: str) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob(f"{name}-*.log")))
