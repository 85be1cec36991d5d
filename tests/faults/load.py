"""The campaign's clients: tenants submitting short jobs over REST, safe to retry.

Each submission carries an ``Idempotency-Key`` and is retried with the same key after a refused
connection (web down), a 503 (a service out) or a 429, until it is accepted (201 or 200) or its
deadline passes. A job counts as *accepted* only once an answer said so (TESTING.md invariant 9:
such a job must never be lost). Any other 5xx answer is a server error, counted.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any

#: GPUs of a job and how often (weights): mostly small, some gangs of 4 (half the campaign's
#: cluster; why no larger ones: docs/HARDENING.md, "What the campaigns found").
GANG_MIX = ((1, 60), (2, 25), (4, 15))
#: Seconds one submission keeps retrying before it is given up (counted, never silently).
SUBMIT_DEADLINE_S = 90.0


@dataclass
class Load:
    """Submits jobs for ``tokens`` (tenant name → API token) at ``rate_per_s`` (Poisson) while
    running; :meth:`burst` adds many at once. ``largest``: the largest gang each tenant submits
    (default: any of :data:`GANG_MIX`). ``accepted``: job id → tenant; counts of the answers."""

    api: str
    tokens: dict[str, str]
    largest: dict[str, int] = field(default_factory=dict)
    rate_per_s: float = 1.0
    seed: int = 0
    accepted: dict[int, str] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)
    unavailable: int = 0
    refused: int = 0
    rejected: list[str] = field(default_factory=list)
    given_up: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)

    def body(self, n: int, tenant: str) -> dict[str, Any]:
        mix = [(g, w) for g, w in GANG_MIX if g <= self.largest.get(tenant, g)]
        gpus = self.random.choices([g for g, _ in mix], [w for _, w in mix])[0]
        # 10-80 iterations of 0.5 s: 5-40 s of job time, a fraction of a second to 2 s of wall time
        return {
            "name": f"fault-{n}",
            "model": "resnet50",
            "batch_size": 128,
            "iterations": self.random.randint(10, 80),
            "gpus": gpus,
            "iteration_time_s": 0.5,
        }

    def submit(self, tenant: str, body: dict[str, Any]) -> None:
        """One submission, retried with its key until accepted or :data:`SUBMIT_DEADLINE_S`."""
        key = str(uuid.uuid4())
        headers = {
            "Authorization": f"Token {self.tokens[tenant]}",
            "Content-Type": "application/json",
            "Idempotency-Key": key,
        }
        deadline = time.monotonic() + SUBMIT_DEADLINE_S
        while time.monotonic() < deadline:
            request = urllib.request.Request(
                f"{self.api}/api/v1/jobs/", data=json.dumps(body).encode(), method="POST", headers=headers
            )
            try:
                with urllib.request.urlopen(request, timeout=15) as answer:
                    job = json.loads(answer.read())
                with self.lock:
                    self.accepted[int(job["id"])] = tenant
                return
            except urllib.error.HTTPError as exc:
                text = exc.read(300).decode(errors="replace")
                with self.lock:
                    if exc.code == 503:
                        self.unavailable += 1
                    elif exc.code >= 500:
                        self.server_errors.append(f"{exc.code} {text}")
                    elif exc.code != 429:
                        self.rejected.append(f"{exc.code} {text}")
                        return
            except (OSError, ValueError):  # web down or cut off mid-answer: retry with the same key
                with self.lock:
                    self.refused += 1
            time.sleep(0.3)
        with self.lock:
            self.given_up += 1

    def burst(self, n: int) -> None:
        """Submit ``n`` jobs at once (each in its own thread), e.g. short jobs finishing during rounds."""
        for _ in range(n):
            self.spawn()

    def spawn(self) -> None:
        with self.lock:
            n = len(self.threads)
            tenant = self.random.choice(sorted(self.tokens))
            body = self.body(n, tenant)
        thread = threading.Thread(target=self.submit, args=(tenant, body), daemon=True)
        with self.lock:
            self.threads.append(thread)
        thread.start()

    def run(self) -> None:
        """Submit at ``rate_per_s`` until :meth:`finish`."""
        while not self.stop.is_set():
            self.spawn()
            self.stop.wait(self.random.expovariate(self.rate_per_s))

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        return thread

    def finish(self, timeout_s: float = SUBMIT_DEADLINE_S + 30) -> None:
        """Stop submitting and wait for every submission in flight to be accepted or given up."""
        self.stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in list(self.threads):
            thread.join(max(0.0, deadline - time.monotonic()))
