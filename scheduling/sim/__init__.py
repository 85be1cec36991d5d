"""Trace-driven simulator: loaders (:mod:`.loaders`), the discrete-event engine (:mod:`.engine`),
reports (:mod:`.report`) and the command line (:mod:`.cli`, ``python -m scheduling.sim``)."""

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
