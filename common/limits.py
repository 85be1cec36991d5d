"""Bounds on one job, the same for the service's API and the simulator's trace loaders, so a
trace row the simulator accepts is one the API would accept too (one fact in one place).

The API (``cluster.serializers``) refuses a job outside these; the loaders
(``scheduling.sim.loaders``) reject such a row with a counted reason.
"""

from __future__ import annotations

#: Largest global batch (samples) a job may have.
MAX_BATCH_SIZE = 1_048_576
#: Most training iterations a job may ask for.
MAX_ITERATIONS = 100_000_000
#: Largest GPU memory (MB) a job or a GPU may name (1 TiB).
MAX_GPU_MEMORY_MB = 1_048_576
#: Longest exclusive time of one iteration (s): one day.
MAX_ITERATION_TIME_S = 86_400.0
#: Latest submit time and longest exclusive run time (``iterations`` × time per iteration) a
#: trace row may have, in s **(ours)**: ten years of 365 days. Far beyond any published trace
#: (the public traces span 125 days at most), and small enough that every sum, square and makespan the
#: simulator's metrics take of such times stays a finite float.
MAX_TRACE_TIME_S = 10 * 365 * 86_400.0
