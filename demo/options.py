"""The demo's options and its one user error (see ``manage.py demo --help``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Trace seconds per wall second: the 61-job testbed trace (makespan ≈ 7,650 s under SJF-BSBF)
#: then takes about 2.5 minutes.
DEFAULT_SPEEDUP = 50.0
#: Trace seconds between rounds: the simulator's default, so both see the same rounds.
DEFAULT_ROUND_INTERVAL_S = 60.0
#: The one line printed when Ctrl-C stops the demo (the command then exits with status 130, or 0
#: when the comparison was already printed).
STOPPED_BY_CTRL_C = "stopped by Ctrl-C"


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
    #: The emulated jobs' true slowdowns are the shipped table's off by up to this relative error
    #: (seeded by ``seed``; demo/truth.py); ``None``: the shipped table's.
    truth_error: float | None = None
    #: Seed of the true slowdowns' errors (the simulator's ``--seed``).
    seed: int = 0
