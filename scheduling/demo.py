"""The live demo: a trace replayed through the REST API on an emulated cluster, time-compressed,
then compared with the simulator on the same input (``manage.py demo``, ``scripts/demo.sh``).

Everything runs in one process on the embedded defaults (SQLite, no broker):

- the web service (Django's threaded WSGI server, static files included), so the dashboard is
  live at ``http://HOST:PORT/dashboard/`` while the demo runs;
- the replay: each trace job is POSTed to ``/api/v1/jobs/`` with its tenant's API token when the
  compressed clock reaches its submit time (``iteration_time_s`` from the trace);
- scheduling rounds every ``round_interval_s / speedup`` wall seconds, aligned with the
  simulator's rounds at multiples of ``round_interval_s`` of trace time, each after
  :func:`cluster.agents.check_heartbeats`;
- the emulated agent fleet (``agent.core.Agent`` with ``EmulatedExecutor``), fed by the
  in-process dispatcher, reporting events and heartbeats over the REST API on loopback.

Time: trace time ``T`` (s) ↔ wall time ``t0 + (T − T_base) / speedup``; ``T_base`` is the last
round boundary at or before the first submission. The live run's metrics are read back from the
database in trace seconds and printed beside the simulator's result for the same jobs, cluster,
policy, quotas and round interval; the fidelity is the ratio of the average JCTs (live ÷ sim).

Units: seconds (s), MB, GPUs, iterations.
"""

from __future__ import annotations

import json
import logging
import math
import random
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, connections

from scheduling.core import types as core
from scheduling.core.metrics import JobOutcome
from scheduling.sim.engine import SimConfig, SimResult, simulate
from scheduling.sim.loaders import LoadedTrace, load_traces

log = logging.getLogger(__name__)

DEFAULT_TRACE = "sjfbsbf-testbed-61.csv"
#: Trace seconds per wall second: the 61-job testbed trace (makespan ≈ 7,650 s under SJF-BSBF)
#: then takes about 2.5 minutes.
DEFAULT_SPEEDUP = 50.0
DEFAULT_ROUND_INTERVAL_S = 60.0
DEMO_TENANTS = ("team-a", "team-b")
#: Seconds (wall) between passes of the emulated agents: events reach the server this late at most.
AGENT_TICK_S = 0.05
#: Models and global batches of the built-in synthetic workload (those of the testbed trace).
SYNTHETIC_MODELS = (
    ("resnet18", 128),
    ("vgg19", 16),
    ("shufflenet_v2_x1_0", 128),
    ("a2c", 64),
    ("dqn", 128),
    ("bert", 4),
    ("gpt2", 4),
    ("vgg16", 16),
)


class DemoError(Exception):
    """A user error (bad option, busy port, non-empty database): shown as one line, exit 2."""


@dataclass(slots=True)
class DemoConfig:
    """Options of one demo run (see ``manage.py demo --help``)."""

    trace: Path | None = None
    synthetic_jobs: int = 40
    nodes: int = 4
    gpus_per_node: int = 8
    gpu_memory_mb: int = 49_140
    policy: str = "sjf-bsbf"
    speedup: float = DEFAULT_SPEEDUP
    round_interval_s: float = DEFAULT_ROUND_INTERVAL_S
    host: str = "127.0.0.1"
    port: int = 8000
    exit_when_done: bool = False
    progress: bool = True
    timeout_s: float | None = None
    #: Multi-process mode: the web service's URL (rounds come from Celery beat, agents from
    #: ``python -m agent --fleet``); ``None``: everything in this process.
    api: str | None = None
    #: Where the node tokens are written (JSON ``{node: token}``, the agent's ``--token-file``).
    token_file: Path | None = None


@dataclass(slots=True)
class Workload:
    """The jobs to replay (tenants already assigned) and where they came from."""

    trace: LoadedTrace
    jobs: tuple[core.Job, ...]
    synthetic: bool


def synthetic_workload(n: int, seed: int = 0) -> LoadedTrace:
    """``n`` jobs **(ours)**: arrivals every 30–240 s, gangs of 1/1/1/2/2/4/8 GPUs, 5–60 minutes
    of exclusive work each, models and batches of the testbed trace; deterministic for ``seed``."""
    if n < 1:
        raise DemoError(f"the synthetic workload needs at least one job, got {n}")
    rng = random.Random(seed)
    jobs = []
    t = 0.0
    for i in range(n):
        t += rng.uniform(30, 240)
        model, batch = rng.choice(SYNTHETIC_MODELS)
        iter_time = round(rng.uniform(0.1, 0.8), 3)
        iterations = max(1, round(rng.uniform(300, 3600) / iter_time))
        jobs.append(
            core.Job(
                i,
                "default",
                model,
                batch,
                rng.choice((1, 1, 1, 2, 2, 4, 8)),
                iterations,
                round(t, 1),
                iter_time,
            )
        )
    return LoadedTrace("synthetic", tuple(jobs), {}, n, ("synthetic",))


def load_workload(config: DemoConfig, profile: core.Profile, say: Callable[[str], None]) -> Workload:
    """The trace (``config.trace``, else the shared data's testbed trace), or the synthetic
    workload when no trace was given and the shared data folder is absent. Jobs are dealt to the
    demo's tenants in submission order (a trace's own tenants are kept when there are several).
    Raises :class:`DemoError` for a trace that cannot be read."""
    from scheduling.datapaths import shared_data_dir, trace_path

    cluster_gpus = config.nodes * config.gpus_per_node
    path = config.trace
    synthetic = False
    if path is None:
        default = Path(trace_path(DEFAULT_TRACE))
        if default.is_file():
            path = default
        else:
            say(
                f"public data not found at {shared_data_dir()} (set SHAREWISE_DATA_DIR or pass --trace): "
                f"using the built-in synthetic workload of {config.synthetic_jobs} jobs"
            )
            synthetic = True
    if synthetic:
        trace = synthetic_workload(config.synthetic_jobs)
    else:
        try:
            trace = load_traces(path, max_gpus=cluster_gpus, throughput=profile.isolated_throughput)
        except (ValueError, OSError) as exc:
            raise DemoError(str(exc)) from None
    names = trace.tenants
    if len(names) > 1 and len(names) <= 8:
        own = {name: name if _valid_name(name) else f"tenant-{i}" for i, name in enumerate(names)}
        jobs = tuple(replace(j, tenant=own[j.tenant]) for j in trace.jobs)
    else:
        jobs = tuple(replace(j, tenant=DEMO_TENANTS[i % len(DEMO_TENANTS)]) for i, j in enumerate(trace.jobs))
    return Workload(trace, jobs, synthetic)


def _valid_name(name: str) -> bool:
    from cluster.models import validate_name

    try:
        validate_name(name, "tenant")
    except ValueError:
        return False
    return True


def tenant_quotas(tenants: Sequence[str], cluster_gpus: int) -> dict[str, int]:
    """Equal guaranteed shares of the cluster (GPUs, the remainder to the first tenants)."""
    base, extra = divmod(cluster_gpus, len(tenants))
    return {t: base + (1 if i < extra else 0) for i, t in enumerate(sorted(tenants))}


# ------------------------------------------------------------------------------------- the setup


@dataclass(slots=True)
class Setup:
    """What :func:`prepare_database` created: node tokens, tenant API tokens, the admin login."""

    node_tokens: dict[str, str]
    tenant_tokens: dict[str, str]
    admin_user: str
    admin_password: str
    quotas: dict[str, int]


def prepare_database(config: DemoConfig, tenants: Sequence[str]) -> Setup:
    """Register the cluster (``node-00`` … with declared GPUs), the tenants with equal quotas and
    unlimited borrowing, and an admin account with a fresh password. Raises :class:`DemoError`
    when the database already holds nodes or jobs (the demo needs a fresh one)."""
    from django.contrib.auth import get_user_model

    from cluster.models import Job, Node, Tenant

    if Node.objects.exists() or Job.objects.exists():
        raise DemoError(
            "the database already holds nodes or jobs; the demo needs a fresh one "
            "(scripts/demo.sh makes var/demo.sqlite3 anew each run; or pass --flush)"
        )
    width = max(2, len(str(config.nodes - 1)))
    node_tokens = {}
    for n in range(config.nodes):
        node, token = Node.register(f"node-{n:0{width}d}", config.gpus_per_node, config.gpu_memory_mb, "v100")
        node_tokens[node.name] = token
    quotas = tenant_quotas(tenants, config.nodes * config.gpus_per_node)
    tenant_tokens = {}
    for name, quota in quotas.items():
        Tenant.objects.filter(name=name).delete()
        get_user_model().objects.filter(username=f"{name}-owner").delete()
        _, tenant_tokens[name] = Tenant.create_with_owner(name, quota_gpus=quota)
    password = secrets.token_urlsafe(9)
    users = get_user_model().objects
    admin = users.filter(username="admin").first()
    if admin is None:
        users.create_superuser("admin", "", password)
    else:
        admin.set_password(password)
        admin.is_staff = admin.is_superuser = True
        admin.save()
    return Setup(node_tokens, tenant_tokens, "admin", password, quotas)


def tune_sqlite() -> None:
    """On SQLite: WAL (readers never wait for the writer) and ``BEGIN IMMEDIATE`` transactions
    with a 30 s busy timeout, so the demo's threads queue for the write lock instead of failing
    with "database is locked". Takes effect for connections opened from now on."""
    db = settings.DATABASES["default"]
    if "sqlite" not in db["ENGINE"]:
        return
    options = db.setdefault("OPTIONS", {})
    options.update(transaction_mode="IMMEDIATE", timeout=30, init_command="PRAGMA journal_mode=WAL;")
    connections["default"].settings_dict.setdefault("OPTIONS", {}).update(options)
    connection.close()


# ------------------------------------------------------------------------------------ the live run


class Clock:
    """Trace time ↔ wall time: ``T = base + (monotonic() − t0) × speedup``."""

    def __init__(self, base: float, speedup: float) -> None:
        self.base = base
        self.speedup = speedup
        self.t0 = time.monotonic()
        self.epoch0 = time.time()

    def trace_now(self) -> float:
        """The trace time now (s)."""
        return self.base + (time.monotonic() - self.t0) * self.speedup

    def wait_until(self, trace_t: float, stop: threading.Event) -> bool:
        """Sleep until trace time ``trace_t``; ``False`` if ``stop`` was set meanwhile."""
        wall = self.t0 + (trace_t - self.base) / self.speedup
        return not stop.wait(max(0.0, wall - time.monotonic()))

    def of(self, when: datetime) -> float:
        """A database timestamp as trace time (s)."""
        return self.base + (when.timestamp() - self.epoch0) * self.speedup


def post_json(url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float = 30.0) -> Any:
    """POST ``body`` as JSON; the decoded answer. Raises ``urllib.error.HTTPError`` for 4xx/5xx."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read() or b"null")


@dataclass(slots=True)
class LiveRun:
    """The threads of a live run and what they share."""

    config: DemoConfig
    workload: Workload
    setup: Setup
    base_url: str
    clock: Clock
    stop: threading.Event = field(default_factory=threading.Event)
    job_ids: dict[int, int] = field(default_factory=dict)  # database pk → trace job id
    errors: list[str] = field(default_factory=list)
    rounds: int = 0

    def replay(self) -> None:
        """POST every job at its (compressed) submit time, through the REST API."""
        try:
            for job in self.workload.jobs:
                if not self.clock.wait_until(job.submit_time, self.stop):
                    return
                body: dict[str, Any] = {
                    "name": f"job-{job.id}",
                    "model": job.model,
                    "batch_size": job.batch_size,
                    "iterations": job.iterations,
                    "gpus": job.gpus,
                    "iteration_time_s": job.iter_time_s,
                }
                if job.memory_mb is not None:
                    body["gpu_memory_mb"] = math.ceil(job.memory_mb)
                headers = {
                    "Authorization": f"Token {self.setup.tenant_tokens[job.tenant]}",
                    "Idempotency-Key": f"demo-{job.id}",
                }
                try:
                    answer = post_json(f"{self.base_url}/api/v1/jobs/", body, headers)
                except urllib.error.HTTPError as exc:
                    self.errors.append(f"job {job.id} refused: HTTP {exc.code} {exc.read(300).decode()}")
                    continue
                self.job_ids[int(answer["id"])] = job.id
        except Exception as exc:  # the main thread reports it and stops
            log.exception("replay failed")
            self.errors.append(f"replay failed: {exc}")
            self.stop.set()
        finally:
            connection.close()

    def schedule(self) -> None:
        """A round at every multiple of the round interval (trace time), after the heartbeat check."""
        from cluster.agents import check_heartbeats
        from scheduling import services

        interval = self.config.round_interval_s
        k = math.ceil(self.clock.base / interval)
        try:
            while self.clock.wait_until(k * interval, self.stop):
                check_heartbeats()
                for _ in range(200):  # the lease may be busy with a partner update for a moment
                    if services.run_round(policy=self.config.policy) is not None:
                        self.rounds += 1
                        break
                    time.sleep(0.01)
                close_old_connections()
                k += 1
        except Exception as exc:
            log.exception("round failed")
            self.errors.append(f"round failed: {exc}")
            self.stop.set()
        finally:
            connection.close()


def start_agents(run: LiveRun) -> tuple[threading.Thread, Callable[[dict[str, Any]], None]]:
    """The emulated fleet: one ``Agent`` per node (declared GPUs, ``EmulatedExecutor`` at the
    demo's speedup), a ``Runner`` thread reporting over HTTP, and the in-process subscriber that
    hands each placement message to its node's agent. Returns the thread and the subscriber."""
    from agent.core import Agent
    from agent.executors import EmulatedExecutor
    from agent.gpus import declared_gpus
    from agent.reporter import HttpTransport, Reporter
    from agent.runner import Runner

    config = run.config
    agents = {
        name: Agent(
            name,
            declared_gpus(name, config.gpus_per_node, config.gpu_memory_mb),
            partial(EmulatedExecutor, speedup=config.speedup),
        )
        for name in run.setup.node_tokens
    }
    reporters = [
        Reporter(HttpTransport(run.base_url, run.setup.node_tokens[name], timeout_s=30.0)) for name in agents
    ]
    # A heartbeat carries every running job's progress: two per round keep the progress the
    # scheduler sees (remaining times, MODEL.md §1) at most half a round old, as in the simulator.
    heartbeat_s = min(5.0, config.round_interval_s / config.speedup / 2)
    runner = Runner(list(agents.values()), reporters, heartbeat_every_s=heartbeat_s, tick_s=AGENT_TICK_S)

    def deliver(message: dict[str, Any]) -> None:
        agent = agents.get(message.get("node", ""))
        if agent is not None:
            agent.apply(message)

    thread = threading.Thread(target=runner.run, args=(run.stop,), name="demo-agents", daemon=True)
    return thread, deliver


def serve(host: str, port: int) -> tuple[Any, threading.Thread]:
    """Start the web service (Django's threaded WSGI server, static files served) in a thread.
    Returns the server (``server.server_address`` has the port) and its thread. Raises
    :class:`DemoError` when the address is taken."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
    from django.core.wsgi import get_wsgi_application

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

    try:
        server = ThreadedWSGIServer((host, port), QuietHandler, ipv6=":" in host)
    except OSError as exc:
        raise DemoError(f"cannot listen on {host}:{port} ({exc.strerror}); pass --port N") from None
    server.daemon_threads = True
    server.set_app(StaticFilesHandler(get_wsgi_application()))
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="demo-web", daemon=True
    )
    thread.start()
    return server, thread


# --------------------------------------------------------------------------------------- metrics


def live_result(run: LiveRun, policy: str) -> SimResult:
    """The live run as a :class:`SimResult` in trace seconds, read from the database: JCT from
    ``submitted_at`` and ``finished_at``; queueing delay = time pending before each placement;
    the GPU timeline and GPU-seconds from the placements (a GPU shared by two jobs charges each
    half, TESTING.md invariant 7)."""
    from cluster.models import Job, JobEvent, Placement

    clock = run.clock
    ids = run.job_ids
    jobs = {j.pk: j for j in Job.objects.filter(pk__in=list(ids)).select_related("tenant")}
    placements = list(
        Placement.objects.filter(job_id__in=list(ids)).values_list(
            "job_id", "gpu_id", "created_at", "ended_at"
        )
    )
    # sweep of placement starts and ends over every GPU
    points: list[tuple[float, int, int, int]] = []  # (t, +1/-1, gpu, job)
    for job_pk, gpu, created, ended in placements:
        end = clock.of(ended) if ended is not None else clock.trace_now()
        points.append((clock.of(created), 1, gpu, job_pk))
        points.append((end, -1, gpu, job_pk))
    points.sort(key=lambda p: (p[0], p[1]))
    residents: dict[int, set[int]] = defaultdict(set)
    gpu_s: dict[int, float] = defaultdict(float)
    timeline: list[tuple[float, int, int]] = []
    last = None
    for t, delta, gpu, job_pk in points:
        if last is not None and t > last:
            for members in residents.values():
                for member in members:
                    gpu_s[member] += (t - last) / len(members)
        last = t
        if delta > 0:
            residents[gpu].add(job_pk)
        else:
            residents[gpu].discard(job_pk)
        busy = sum(1 for m in residents.values() if m)
        shared = sum(1 for m in residents.values() if len(m) > 1)
        if timeline and timeline[-1][0] == t:
            timeline[-1] = (t, busy, shared)
        else:
            timeline.append((t, busy, shared))
    waits: dict[int, float] = defaultdict(float)
    pending_since: dict[int, float] = {}
    preemptions: dict[int, int] = defaultdict(int)
    for job_pk, kind, at in (
        JobEvent.objects.filter(job_id__in=list(ids)).order_by("at", "id").values_list("job_id", "kind", "at")
    ):
        t = clock.of(at)
        if kind in (JobEvent.Kind.SUBMITTED, JobEvent.Kind.PREEMPTED, JobEvent.Kind.REQUEUED):
            pending_since.setdefault(job_pk, t)
            if kind == JobEvent.Kind.PREEMPTED:
                preemptions[job_pk] += 1
        elif kind == JobEvent.Kind.PLACED and job_pk in pending_since:
            waits[job_pk] += t - pending_since.pop(job_pk)
    outcomes = []
    unfinished = []
    for pk, job in sorted(jobs.items(), key=lambda kv: (kv[1].finished_at or kv[1].submitted_at, kv[0])):
        if job.status != Job.Status.SUCCEEDED or job.finished_at is None:
            unfinished.append(ids[pk])
            continue
        first = clock.of(job.started_at) if job.started_at else clock.of(job.finished_at)
        outcomes.append(
            JobOutcome(
                ids[pk],
                job.tenant.name,
                job.gpus,
                clock.of(job.submitted_at),
                first,
                clock.of(job.finished_at),
                waits[pk],
                gpu_s[pk],
                preemptions=preemptions[pk],
            )
        )
    missing = [j.id for j in run.workload.jobs if j.id not in set(ids.values())]
    from scheduling.models import Round

    return SimResult(
        f"{policy} (live)",
        tuple(outcomes),
        tuple(unfinished + missing),
        tuple(timeline),
        run.config.nodes * run.config.gpus_per_node,
        Round.objects.count(),
        sum(preemptions.values()),
        math.nan,
    )


def fidelity(live: dict[str, Any], simulated: dict[str, Any]) -> float:
    """Live average JCT ÷ simulated average JCT (``nan`` when either is missing or zero)."""
    a, b = live.get("avg_jct_s"), simulated.get("avg_jct_s")
    if not a or not b:
        return math.nan
    return float(a) / float(b)


# ------------------------------------------------------------------------------------- the driver


def run_demo(config: DemoConfig, say: Callable[[str], None]) -> int:
    """The whole demo (see the module docstring); returns the exit code: 0 when every job
    finished (also when Ctrl-C ends the serving afterwards), 1 otherwise, 130 when Ctrl-C stops it
    before the end (one line, :data:`STOPPED_BY_CTRL_C`, is said either way). Raises
    :class:`DemoError` for bad input (before anything runs)."""
    from scheduling import services
    from scheduling.core.policies import UnknownPolicyError, get_policy
    from scheduling.profiles import load_default_profile
    from scheduling.sim.report import build_report, format_table

    if not (math.isfinite(config.speedup) and config.speedup > 0):
        raise DemoError(f"--speedup must be a positive number, got {config.speedup}")
    if not (math.isfinite(config.round_interval_s) and config.round_interval_s > 0):
        raise DemoError(
            f"--round-interval must be a positive number of seconds, got {config.round_interval_s}"
        )
    try:
        policy = get_policy(config.policy)
    except UnknownPolicyError as exc:
        raise DemoError(str(exc)) from None
    profile = load_default_profile()
    workload = load_workload(config, profile, say)
    tune_sqlite()
    setup = prepare_database(config, sorted({j.tenant for j in workload.jobs}))
    cluster = core.Cluster.uniform(config.nodes, config.gpus_per_node, config.gpu_memory_mb)
    sim_config = SimConfig(round_interval_s=config.round_interval_s, tenant_quotas=dict(setup.quotas))
    simulated = simulate(workload.jobs, cluster, policy, profile, sim_config)

    if config.token_file is not None:
        from cluster.agents import write_token_file

        try:
            write_token_file(config.token_file, setup.node_tokens)
        except OSError as exc:
            raise DemoError(f"cannot write --token-file {config.token_file}: {exc.strerror}") from None
    server = web = deliver = None
    if config.api is None:
        server, web = serve(config.host, config.port)
        base_url = f"http://{config.host}:{server.server_address[1]}"
    else:
        base_url = config.api.rstrip("/")
        wait_until_ready(base_url)
    first = min(j.submit_time for j in workload.jobs)
    clock = Clock(math.floor(first / config.round_interval_s) * config.round_interval_s, config.speedup)
    run = LiveRun(config, workload, setup, base_url, clock)
    threads = [threading.Thread(target=run.replay, name="demo-replay", daemon=True)]
    if config.api is None:
        agents_thread, deliver = start_agents(run)
        services.set_dispatcher(services.local_dispatch)
        services.subscribe(deliver)
        threads += [agents_thread, threading.Thread(target=run.schedule, name="demo-rounds", daemon=True)]
    for thread in threads:
        thread.start()
    quotas = ", ".join(f"{t} {q} GPUs" for t, q in setup.quotas.items())
    say(
        f"cluster {config.nodes}x{config.gpus_per_node} GPUs of {config.gpu_memory_mb:,} MB; "
        f"tenants: {quotas}"
    )
    say(
        f"replaying {len(workload.jobs)} jobs of {workload.trace.name} through the REST API, "
        f"{config.speedup:g}x faster than real time; {config.policy} rounds every "
        f"{config.round_interval_s:g} s of trace time "
        f"({config.round_interval_s / config.speedup:.2f} s wall)"
    )
    say(
        f"dashboard: {base_url}/dashboard/  (login: {setup.admin_user} / {setup.admin_password}); "
        f"API docs: {base_url}/api/docs/"
    )
    code: int | None = None
    try:
        finished = wait_for_jobs(run, threads[0])
        live = live_result(run, config.policy)
        report = build_report(
            workload.trace,
            cluster,
            sim_config,
            {live.policy: live, f"{config.policy} (simulator)": simulated},
        )
        say("")
        say(format_table(report))
        names = list(report["policies"])
        ratio = fidelity(report["policies"][names[0]], report["policies"][names[1]])
        say(
            f"fidelity: live average JCT / simulated average JCT = {ratio:.3f} "
            f"({abs(ratio - 1):.1%} apart; target within 10 %)"
        )
        for error in run.errors[:10]:
            say(f"error: {error}")
        code = 0 if finished else 1
        if not config.exit_when_done and not run.stop.is_set():
            say(f"the dashboard stays live at {base_url}/dashboard/ ; Ctrl-C stops")
            while not run.stop.wait(1.0):
                pass
    except KeyboardInterrupt:
        say(STOPPED_BY_CTRL_C)
        if code is None:  # before the comparison: the run is incomplete
            code = 130
    finally:
        quiet = QuietAgentConflicts()
        request_log = logging.getLogger("django.request")
        request_log.addFilter(quiet)  # agents' last reports of stopped jobs are refused (409): expected
        run.stop.set()
        try:
            for thread in threads:
                thread.join(timeout=20)
            if deliver is not None:
                services.unsubscribe(deliver)
                services.set_dispatcher(None)
            if server is not None and web is not None:
                server.shutdown()
                server.server_close()
                web.join(timeout=5)
        finally:
            request_log.removeFilter(quiet)
    return code


#: The one line printed when Ctrl-C stops the demo (the command then exits with status 130, or 0
#: when the comparison was already printed).
STOPPED_BY_CTRL_C = "stopped by Ctrl-C"


class QuietAgentConflicts(logging.Filter):
    """Drops ``django.request``'s "Conflict: /api/v1/agent/..." warnings (a 409 to a node agent's
    report, refused because its job was stopped or requeued meanwhile) while the demo shuts down."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        path = getattr(request, "path", "")
        return not (getattr(record, "status_code", None) == 409 and path.startswith("/api/v1/agent/"))


def wait_until_ready(base_url: str, timeout_s: float = 120.0) -> None:
    """Poll ``base_url/readyz`` until it answers 200; raises :class:`DemoError` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{base_url}/readyz", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise DemoError(f"the web service at {base_url} did not answer /readyz within {timeout_s:g} s")
        time.sleep(1.0)


def wait_for_jobs(run: LiveRun, replay: threading.Thread) -> bool:
    """Block until every job of the workload has ended (progress bar of finished jobs), the run
    failed, or ``config.timeout_s`` wall seconds passed; whether all of them finished."""
    from tqdm import tqdm

    from cluster.models import Job

    total = len(run.workload.jobs)
    deadline = None if run.config.timeout_s is None else time.monotonic() + run.config.timeout_s
    ended = (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED)
    with tqdm(
        total=total, unit="job", desc="finished", disable=not run.config.progress, dynamic_ncols=True
    ) as bar:
        try:
            while not run.stop.is_set():
                done = Job.objects.filter(pk__in=list(run.job_ids), status__in=ended).count()
                bar.n = done
                bar.set_postfix_str(
                    f"submitted {len(run.job_ids)}, trace time {run.clock.trace_now():,.0f} s", refresh=False
                )
                bar.refresh()
                if not replay.is_alive() and done >= len(run.job_ids):
                    break
                if deadline is not None and time.monotonic() > deadline:
                    run.errors.append(f"gave up after {run.config.timeout_s:g} s (--timeout)")
                    break
                run.stop.wait(0.25)
        finally:
            connection.close()
    return not run.errors and len(run.job_ids) == total and done == total
