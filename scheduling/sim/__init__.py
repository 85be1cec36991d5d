"""Trace-driven simulator: loaders (:mod:`.loaders`), the discrete-event engine (:mod:`.engine`,
with each job's bookkeeping in :mod:`.job_state`), quotas for a run (:mod:`.quotas`), reports
(:mod:`.report`) and the command line (:mod:`.cli`, ``python -m scheduling.sim``)."""

from scheduling.sim.engine import SimConfig, SimResult, SimulationError, Simulator, simulate
from scheduling.sim.loaders import LoadedTrace, TraceError, load_traces

__all__ = [
    "LoadedTrace",
    "SimConfig",
    "SimResult",
    "SimulationError",
    "Simulator",
    "TraceError",
    "load_traces",
    "simulate",
]
