"""A fault campaign: the deployment of :mod:`tests.faults.deployment` under a load of short jobs,
hit by faults at random moments, with TESTING.md invariants 1–9 checked in the database after
each fault has been repaired, and every accepted job required to succeed at the end.

Faults (:data:`FAULTS`): the round worker, the agent fleet, the web process or beat killed with
SIGKILL (the worker preferably while it holds the round lease, i.e. mid-round) and started again;
a node registered whose agent never starts; the broker and cache cut off for every process (the
proxy drops all connections); the web process restarted with a cache it cannot reach; a second
round worker (two rounds at once); a burst of short jobs finishing during rounds.

Counted: faults injected (per kind), jobs accepted / succeeded / lost, invariant breaks, lost
rounds (a round task that raised, in the worker logs), server errors (5xx other than the 503 of
an outage, seen by the clients or logged by the web process).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from cluster.models import Job, Node, Quota, Tenant
from cluster.tokens import write_token_file
from scheduling.models import Round, SchedulerLease
from tests.faults import checks
from tests.faults.deployment import Deployment
from tests.faults.load import Load

#: Seconds after a fault's repair before the invariants are checked: a requeue or restart takes
#: up to the heartbeat timeout plus a start report **(ours)**.
SETTLE_S = 5.0
#: Seconds the drain at the end may take before a job still unfinished counts as lost.
DRAIN_S = 180.0
#: The tenants: (name, largest gang submitted). No quotas: with them, sjf-bsbf-fair's starvation
#: bound does not hold (docs/HARDENING.md, "What the campaigns found"); quotas under faults are
#: covered by the service tests. team-c submits 1-GPU jobs only.
TENANTS = (("team-a", 4), ("team-b", 4), ("team-c", 1))
#: Unreachable Redis for the "web loses the cache" fault (nothing listens on port 1).
DEAD_CACHE = "redis://127.0.0.1:1/0"


@dataclass
class Report:
    """What a campaign did and found (printed by :meth:`summary`, written as JSON)."""

    seed: int
    faults: dict[str, int] = field(default_factory=dict)
    jobs_accepted: int = 0
    jobs_succeeded: int = 0
    jobs_lost: int = 0
    breaks: list[str] = field(default_factory=list)
    lost_rounds: int = 0
    rounds: int = 0
    server_errors: list[str] = field(default_factory=list)
    unavailable_answers: int = 0
    rejected: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def faults_injected(self) -> int:
        return sum(self.faults.values())

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items()))
        lines = [
            f"fault campaign (seed {self.seed}, {self.wall_s:.0f} s): "
            f"{self.faults_injected} faults injected ({kinds})",
            f"jobs: {self.jobs_accepted} accepted, {self.jobs_succeeded} succeeded, {self.jobs_lost} lost",
            f"invariant breaks: {len(self.breaks)}",
            *[f"  {b}" for b in self.breaks[:20]],
            f"rounds: {self.rounds} recorded, {self.lost_rounds} lost",
            f"server errors (5xx other than 503): {len(self.server_errors)}; "
            f"503 answers: {self.unavailable_answers}",
            f"submissions refused as invalid: {len(self.rejected)}",
        ]
        return "\n".join(lines)

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "faults_injected": self.faults_injected}, indent=1)


@dataclass
class Campaign:
    """Run :meth:`run` (``faults`` faults, seeded) against a fresh deployment on the current database."""

    deployment: Deployment
    faults: int
    seed: int = 1
    rate_per_s: float = 1.0
    log: Callable[[str], None] = print
    report: Report = field(init=False)
    load: Load = field(init=False)
    start: datetime = field(init=False)

    def __post_init__(self) -> None:
        self.random = random.Random(self.seed)
        self.report = Report(self.seed)
        t = self.deployment.timing
        self.limits = checks.Limits(t.heartbeat_timeout_s, t.starvation_bound_s)
        self.ghosts = 0

    # ------------------------------------------------------------------------------- setup
    def prepare(self) -> dict[str, str]:
        """Register the fleet's nodes (tokens in the agents' file) and two tenants; their tokens."""
        nodes, gpus = (int(x) for x in self.deployment.fleet.split("x"))
        tokens = {}
        for i in range(nodes):
            node, token = Node.register(f"{self.deployment.fleet_prefix}-{i:02d}", gpus, 49_140, "v100")
            tokens[node.name] = token
        write_token_file(self.deployment.token_file, tokens)
        tenants = {}
        for name, _ in TENANTS:
            _, tenants[name] = Tenant.create_with_owner(name, quota_gpus=0)
        Quota.objects.all().delete()  # no quota rows, no quota gate (see TENANTS)
        return tenants

    # ------------------------------------------------------------------------------- faults
    def kill_worker(self) -> None:
        """SIGKILL the round worker, mid-round when it holds the lease within 2 s, then restart."""
        deadline = time.monotonic() + self.random.uniform(0.0, 2.0)
        while time.monotonic() < deadline:
            if SchedulerLease.objects.exclude(holder="").filter(expires_at__gt=timezone.now()).exists():
                break
            time.sleep(0.01)
        self.deployment.kill("worker")
        time.sleep(self.random.uniform(0.2, 2.0))
        self.deployment.start("worker")

    def kill_agents(self) -> None:
        """SIGKILL the agent fleet; restart it after less or more than the heartbeat timeout."""
        time.sleep(self.random.uniform(0.0, 1.0))
        self.deployment.kill("agents")
        time.sleep(self.random.uniform(0.2, 2 * self.deployment.timing.heartbeat_timeout_s))
        self.deployment.start("agents")

    def kill_web(self) -> None:
        time.sleep(self.random.uniform(0.0, 1.0))
        self.deployment.kill("web")
        time.sleep(self.random.uniform(0.2, 1.5))
        self.deployment.start("web")
        self.deployment.wait_web()

    def kill_beat(self) -> None:
        self.deployment.kill("beat")
        time.sleep(self.random.uniform(0.2, 2.0))
        self.deployment.start("beat")

    def ghost_node(self) -> None:
        """Register a node whose agent never starts (4 GPUs)."""
        self.ghosts += 1
        Node.register(f"ghost-{self.seed}-{self.ghosts:03d}", 4, 49_140, "v100")
        time.sleep(self.random.uniform(0.5, 2.0))

    def broker_outage(self) -> None:
        """Cut Redis (broker and cache) off from every process for 1–4 s."""
        proxy = self.deployment_proxy
        proxy.cut()
        time.sleep(self.random.uniform(1.0, 4.0))
        proxy.restore()

    def web_loses_cache(self) -> None:
        """Run the web process for 2–4 s with a cache it cannot reach (agents' heartbeats hit it)."""
        self.deployment.restart("web", CACHE_URL=DEAD_CACHE)
        self.deployment.wait_web_alive()
        time.sleep(self.random.uniform(2.0, 4.0))
        self.deployment.restart("web")
        self.deployment.wait_web()

    def second_worker(self) -> None:
        """A second round worker for 2–4 s: two rounds at once (the lease lets one run)."""
        extra = Deployment(
            self.deployment.database_url, self.deployment.redis_url, self.deployment.token_file,
            self.deployment.log_dir, timing=self.deployment.timing, port=self.deployment.port,
            starts={"worker": 100 + self.report.faults.get("second_worker", 0)},
        )  # fmt: skip
        extra.start("worker")
        time.sleep(self.random.uniform(2.0, 4.0))
        extra.kill("worker")

    def burst(self) -> None:
        """20 short jobs at once: many finish while rounds run."""
        self.load.burst(20)
        time.sleep(self.random.uniform(1.0, 3.0))

    # ------------------------------------------------------------------------------- the run
    def run(self, proxy: Any) -> Report:
        self.deployment_proxy = proxy
        began = time.monotonic()
        tokens = self.prepare()
        self.start = timezone.now()
        self.deployment.start_all()
        largest = dict(TENANTS)
        self.load = Load(
            self.deployment.api, tokens, largest=largest, rate_per_s=self.rate_per_s, seed=self.seed
        )
        self.load.start()
        time.sleep(3.0)
        kinds = list(FAULTS)
        try:
            for n in range(self.faults):
                kind = self.random.choice(kinds)
                FAULTS[kind](self)
                self.report.faults[kind] = self.report.faults.get(kind, 0) + 1
                self.recover()
                time.sleep(SETTLE_S)
                found = checks.all_breaks(self.start, list(self.load.accepted), self.limits)
                self.report.breaks += [f"after {kind} #{n + 1}: {b}" for b in found]
                self.log(
                    f"fault {n + 1}/{self.faults} {kind}: {len(found)} breaks, {len(self.load.accepted)} jobs"
                )
            self.drain()
        finally:
            self.load.stop.set()
            self.deployment.stop_all()
        self.finish(time.monotonic() - began)
        return self.report

    def recover(self) -> None:
        """Every process running again and the web ready (a fault that left one down is repaired)."""
        for name in ("worker", "beat", "agents", "web"):
            if not self.deployment.alive(name):
                self.deployment.start(name)
        self.deployment_proxy.restore()
        self.deployment.wait_web()

    def drain(self) -> None:
        """Stop submitting; wait until every accepted job has ended (or :data:`DRAIN_S` passed)."""
        self.load.finish()
        deadline = time.monotonic() + DRAIN_S
        ids = list(self.load.accepted)
        while time.monotonic() < deadline:
            if not Job.objects.filter(pk__in=ids, status__in=Job.ACTIVE_STATUSES).exists():
                break
            time.sleep(1.0)
        self.report.breaks += [
            f"at the end: {b}" for b in checks.all_breaks(self.start, ids, self.limits, final=True)
        ]

    def finish(self, wall_s: float) -> None:
        ids = list(self.load.accepted)
        report = self.report
        report.wall_s = wall_s
        report.jobs_accepted = len(ids)
        report.jobs_succeeded = Job.objects.filter(pk__in=ids, status=Job.Status.SUCCEEDED).count()
        report.jobs_lost = len(ids) - report.jobs_succeeded + self.load.given_up
        report.rounds = Round.objects.count()
        worker_logs = self.deployment.logs("worker")
        report.lost_rounds = sum(
            1 for line in worker_logs.splitlines() if "sharewise.run_round" in line and "raised" in line
        )
        web_errors = [
            line for line in self.deployment.logs("web").splitlines() if "Internal Server Error" in line
        ]
        report.server_errors = self.load.server_errors + web_errors
        report.unavailable_answers = self.load.unavailable
        report.rejected = self.load.rejected


FAULTS: dict[str, Callable[[Campaign], None]] = {
    "worker_kill": Campaign.kill_worker,
    "agents_kill": Campaign.kill_agents,
    "web_kill": Campaign.kill_web,
    "beat_kill": Campaign.kill_beat,
    "node_never_starts": Campaign.ghost_node,
    "broker_outage": Campaign.broker_outage,
    "web_loses_cache": Campaign.web_loses_cache,
    "second_worker": Campaign.second_worker,
    "short_job_burst": Campaign.burst,
}
