"""The demo's emulated agent fleet: one node agent per registered node, in this process, fed by
the in-process dispatcher and reporting over the REST API on loopback, exactly as real agents do
(docs/AGENT.md)."""

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
from demo.live import LiveRun

#: Seconds (wall) between passes of the emulated agents: events reach the server this late at most.
AGENT_TICK_S = 0.05


def start_agents(run: LiveRun) -> tuple[threading.Thread, Callable[[dict[str, Any]], None]]:
    """The emulated fleet: one ``Agent`` per node (declared GPUs, ``EmulatedExecutor`` at the
    demo's speedup), a ``Runner`` thread reporting over HTTP, and the in-process subscriber that
    hands each placement message to its node's agent. Returns the thread and the subscriber."""
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
