"""The demo's driver: set up, start the threads, wait, compare with the simulator, shut down."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from cluster.tokens import write_token_file
from demo.database import prepare_database, record_trace_clock, tune_sqlite
from demo.fleet import start_agents
from demo.live import Clock, LiveRun, QuietAgentConflicts, serve, wait_for_jobs, wait_until_ready
from demo.options import STOPPED_BY_CTRL_C, DemoConfig, DemoError
from demo.report import fidelity, learning_line, live_result, throughput_line
from demo.shutdown import join_within
from demo.truth import simulated as simulate_like_live
from demo.truth import truth_line, truth_profile
from demo.workload import load_workload
from scheduling import service
from scheduling.core import types as core
from scheduling.core.policies import UnknownPolicyError, get_policy
from scheduling.profiles import load_default_profile
from scheduling.sim.engine import SimConfig
from scheduling.sim.report import build_report, format_table


def run_demo(config: DemoConfig, say: Callable[[str], None]) -> int:
    """The whole demo (see the module docstring); returns the exit code: 0 when every job
    finished (also when Ctrl-C ends the serving afterwards), 1 otherwise, 130 when Ctrl-C stops it
    before the end (one line, :data:`STOPPED_BY_CTRL_C`, is said either way). Raises
    :class:`DemoError` for bad input (before anything runs)."""
    if not (math.isfinite(config.speedup) and config.speedup > 0):
        raise DemoError(f"--speedup must be a positive number, got {config.speedup}")
    if not (math.isfinite(config.round_interval_s) and config.round_interval_s > 0):
        raise DemoError(
            f"--round-interval must be a positive number of seconds, got {config.round_interval_s}"
        )
    if config.truth_error and config.api is not None:
        raise DemoError("--truth-error needs the in-process emulated agents (it cannot reach --api's)")
    try:
        policy = get_policy(config.policy)
    except UnknownPolicyError as exc:
        raise DemoError(str(exc)) from None
    profile = load_default_profile()
    truth = truth_profile(profile, config)
    workload = load_workload(config, profile, say)
    tune_sqlite()
    setup = prepare_database(config, sorted({j.tenant for j in workload.jobs}))
    cluster = core.Cluster.uniform(config.nodes, config.gpus_per_node, config.gpu_memory_mb)
    sim_config = SimConfig(round_interval_s=config.round_interval_s, tenant_quotas=dict(setup.quotas))
    simulated, learned = simulate_like_live(
        workload.jobs, cluster, policy, profile, truth, sim_config, config
    )

    if config.token_file is not None:
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
        wait_until_ready(base_url, say=say)
    first = min(j.submit_time for j in workload.jobs)
    clock = Clock(math.floor(first / config.round_interval_s) * config.round_interval_s, config.speedup)
    record_trace_clock(clock.speedup, clock.base, clock.epoch0, workload.trace.name)
    run = LiveRun(config, workload, setup, base_url, clock, truth)
    threads = [threading.Thread(target=run.replay, name="demo-replay", daemon=True)]
    if config.api is None:
        agents_thread, deliver = start_agents(run)
        service.set_dispatcher(service.local_dispatch)
        service.subscribe(deliver)
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
    say(truth_line(config, learned))
    code: int | None = None
    try:
        finished = wait_for_jobs(run, threads[0])
        wall_s = time.monotonic() - clock.t0
        # Said before the comparison, so nothing after it can hide why a job is missing.
        for error in run.errors[:10]:
            say(f"error: {error}")
        if run.refused:
            # The simulator ran every job of the trace; the comparison is of the jobs both ran.
            say(
                f"the API refused {len(run.refused)} job(s) ({_ids(run.refused)}): "
                "the simulator runs again without them for the comparison"
            )
            kept = tuple(j for j in workload.jobs if j.id not in run.refused)
            simulated, _ = simulate_like_live(kept, cluster, policy, profile, truth, sim_config, config)
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
        say(learning_line(run))
        say(throughput_line(len(live.outcomes), len(workload.jobs), wall_s))
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
            join_within(threads, 20.0)  # replay, rounds, agents: 20 s for all (demo/shutdown.py)
            if deliver is not None:
                service.unsubscribe(deliver)
                service.set_dispatcher(None)
            if server is not None and web is not None:
                server.shutdown()
                server.server_close()
                web.join(timeout=5)
        finally:
            request_log.removeFilter(quiet)
    return code


def _ids(ids: set[int]) -> str:
    """``"trace jobs 3, 7, 9"`` (the first ten, then how many more)."""
    shown = sorted(ids)[:10]
    more = f" and {len(ids) - len(shown)} more" if len(ids) > len(shown) else ""
    return f"trace job{'s' if len(ids) > 1 else ''} {', '.join(map(str, shown))}{more}"
