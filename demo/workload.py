"""The jobs the demo replays: a trace the simulator reads, or a built-in synthetic workload, dealt
to the demo's tenants; and the tenants' equal quotas.

Units: seconds (s), GPUs, iterations.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cluster.models import validate_name
from demo.options import DemoConfig, DemoError
from scheduling.core import types as core
from scheduling.datapaths import shared_data_dir, trace_path
from scheduling.sim.loaders import LoadedTrace, load_traces

#: The trace replayed when none is given (in the shared data's ``traces/``).
DEFAULT_TRACE = "sjfbsbf-testbed-61.csv"
#: The demo's tenants when the trace has fewer than two of its own (a trace's own are kept, any number).
DEMO_TENANTS = ("team-a", "team-b")
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
    demo's tenants in submission order (a trace's own tenants, however many, are kept when there are
    several: :func:`tenant_names`). The trace's rejected rows, if any, are said (count per reason).
    Raises :class:`DemoError` for a trace that cannot be read."""
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
        if trace.rejected:
            reasons = "; ".join(f"{reason}: {n}" for reason, n in sorted(trace.rejected.items()))
            say(
                f"{sum(trace.rejected.values())} of {trace.rows} trace rows rejected ({reasons}); "
                "neither the live run nor the simulator sees them"
            )
    names = trace.tenants
    if len(names) > 1:
        own = tenant_names(names)
        jobs = tuple(replace(j, tenant=own[j.tenant]) for j in trace.jobs)
    else:
        jobs = tuple(replace(j, tenant=DEMO_TENANTS[i % len(DEMO_TENANTS)]) for i, j in enumerate(trace.jobs))
    return Workload(trace, jobs, synthetic)


def tenant_names(names: Sequence[str]) -> dict[str, str]:
    """The service's tenant name for each of a trace's tenants (any number): the trace's own name
    in the service's alphabet (lowercase, other characters as hyphens, at most 64: ``vc_6214e9`` →
    ``vc-6214e9``), else or when already taken ``tenant-N`` (``N`` its position); never one name
    twice."""
    wanted = {name: _slug(name) for name in names}
    counts = Counter(wanted.values())
    taken = {slug for slug in wanted.values() if slug and counts[slug] == 1}
    own: dict[str, str] = {}
    for i, name in enumerate(names):
        if wanted[name] in taken:
            own[name] = wanted[name]
            continue
        n = i
        while f"tenant-{n}" in taken:  # a trace tenant may itself be called tenant-N
            n += len(names)
        own[name] = f"tenant-{n}"
        taken.add(own[name])
    return own


def _slug(name: str) -> str:
    """``name`` in the service's tenant alphabet, or ``""`` when nothing of it is left."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:64].rstrip("-")
    return slug if slug and _valid_name(slug) else ""


def _valid_name(name: str) -> bool:
    try:
        validate_name(name, "tenant")
    except ValueError:
        return False
    return True


def equal_quotas(tenants: Sequence[str], cluster_gpus: int) -> dict[str, int]:
    """Equal guaranteed shares of the cluster (GPUs, the remainder to the first tenants)."""
    base, extra = divmod(cluster_gpus, len(tenants))
    return {t: base + (1 if i < extra else 0) for i, t in enumerate(sorted(tenants))}
