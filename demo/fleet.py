"""The demo's emulated agent fleet: one node agent per registered node, in this process, fed by
the in-process dispatcher and reporting over the REST API on loopback, exactly as real agents do
(docs/AGENT.md). Its jobs run at their true speeds (demo/truth.py), not at the service's belief."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from agent.core import Agent
from agent.executors import EmulatedExecutor
from agent.gpus import declared_gpus
from agent.reporter import HttpTransport, Reporter
from agent.runner import Runner
from cluster.models import Job
from demo.live import LiveRun
from demo.truth import EmulatedSpeeds
from scheduling.profiles import load_default_profile

#: Seconds (wall) between passes of the emulated agents: events reach the server this late at most.
AGENT_TICK_S = 0.05
#: Fewest wall seconds between two heartbeats of an emulated node **(ours)**: half a round at a
#: high speedup or short rounds would be several a second per node, each a request the web
#: service serves, for progress no round reads sooner.
MIN_HEARTBEAT_S = 1.0
#: Fewest wall seconds between two reports of an emulated node (its events and output, one
#: request: docs/AGENT.md §2b) between heartbeats **(ours)**: short jobs start and end several
#: times a second per node, and a report every agent tick would be a request each; a quarter of a
#: second is half a round at the 0.5 s interval of bench_kueue.py, so a report waits at most that.
REPORT_EVERY_S = 0.25


def start_agents(run: LiveRun) -> tuple[threading.Thread, Callable[[dict[str, Any]], None]]:
    """The emulated fleet: one ``Agent`` per node (declared GPUs, ``EmulatedExecutor`` at the
    demo's speedup and the jobs' true speeds), each with its own ``Runner`` thread reporting
    over HTTP as a real node's agent does (so one node's slow answer never delays another's
    heartbeat), and the in-process subscriber that hands each placement message to its node's
    agent. Returns the thread that runs them all (until the run's stop event, then joins them)
    and the subscriber."""
    config = run.config
    shipped = load_default_profile()
    speeds = EmulatedSpeeds(
        shipped, run.truth or shipped, {j.id: j for j in run.workload.jobs}, run.job_ids, trace_id_of
    )
    agents = {
        name: Agent(
            name,
            declared_gpus(name, config.gpus_per_node, config.gpu_memory_mb),
            partial(EmulatedExecutor, speedup=config.speedup, truth=speeds),
        )
        for name in run.setup.node_tokens
    }
    # A heartbeat carries every running job's progress: two per round keep the progress the
    # scheduler sees (remaining times, MODEL.md §1) at most half a round old, as in the simulator
    # (at most one a second, MIN_HEARTBEAT_S).
    heartbeat_s = max(MIN_HEARTBEAT_S, min(5.0, config.round_interval_s / config.speedup / 2))
    runners = [
        Runner(
            [agent],
            [Reporter(HttpTransport(run.base_url, run.setup.node_tokens[name], timeout_s=30.0))],
            heartbeat_every_s=heartbeat_s,
            tick_s=AGENT_TICK_S,
            report_every_s=REPORT_EVERY_S,
        )
        for name, agent in agents.items()
    ]

    def deliver(message: dict[str, Any]) -> None:
        agent = agents.get(message.get("node", ""))
        if agent is not None:
            agent.apply(message)

    def run_fleet() -> None:
        threads = [
            threading.Thread(target=r.run, args=(run.stop,), name=f"demo-agent-{name}", daemon=True)
            for r, name in zip(runners, agents, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    thread = threading.Thread(target=run_fleet, name="demo-agents", daemon=True)
    return thread, deliver


def trace_id_of(job_pk: int) -> int | None:
    """The trace job id of a replayed job, from its name (``job-<trace id>``, :mod:`demo.live`)."""
    name = Job.objects.filter(pk=job_pk).values_list("name", flat=True).first() or ""
    return int(name[4:]) if name.startswith("job-") and name[4:].isdigit() else None
