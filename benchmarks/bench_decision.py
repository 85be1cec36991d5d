"""Time one SJF-BSBF scheduling decision on a large synthetic cluster.

Scenario: 4,096 GPUs (512 nodes × 8 GPUs of 49,140 MB, the SJF-BSBF testbed's GPU), half of them
busy with running jobs, and 10,000 (then 1,000) waiting jobs. Models and batch sizes are those of
the SJF-BSBF testbed trace (Tiresias/Muri model names); gang sizes follow the Muri simulation
traces' mix (mostly 1, 4 and 8 GPUs). The profile is ``scheduling.profiles.load_default_profile()``
when it loads, else the tests' fake profile. Prints median and minimum wall time over several
runs (``time.perf_counter``), the median CPU time (``time.process_time``, less sensitive to other
processes on a shared machine), the first (cold) decision's wall and CPU time, and the machine.
Not a test: nothing is asserted.

``--collector paused`` turns Python's cyclic garbage collector off during each decision, as the
service's round runs it (``scheduling.service.rounds.collector_paused``); by default it stays on,
as in the simulator (a first decision allocates enough to set off a full collection of the heap).

Run: ``python benchmarks/bench_decision.py [--runs N] [--policy NAME] [--explain] [--collector on|paused]``
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import machine  # benchmarks/machine.py

from scheduling.core.policies import POLICY_NAMES, get_policy  # noqa: E402
from scheduling.core.types import Cluster, Job, Placement, Profile, RunningJob, Snapshot  # noqa: E402

# (model, global batch size) as in the SJF-BSBF testbed trace
MODELS = [
    ("vgg16", 16),
    ("vgg19", 16),
    ("resnet18", 128),
    ("shufflenet_v2_x1_0", 128),
    ("bert", 4),
    ("gpt2", 4),
    ("dqn", 128),
    ("a2c", 64),
]
# gang sizes and weights, roughly the Muri simulation traces' mix
GANGS = [(1, 36), (2, 2), (4, 28), (8, 30), (16, 3), (32, 1)]


def load_profile() -> tuple[Profile, str]:
    """The real default profile, or the tests' fake when it is not available."""
    try:
        from scheduling.profiles import load_default_profile

        return load_default_profile(), "scheduling.profiles.load_default_profile()"
    except Exception as exc:  # the benchmark still runs, and says which profile it used
        from tests.unit.fakes import FakeProfile

        return FakeProfile(default_xi=1.3), f"tests.unit.fakes.FakeProfile (default profile failed: {exc})"


def make_job(rng: random.Random, job_id: int, submit: float, gpus: int) -> Job:
    model, batch = rng.choice(MODELS)
    iterations = rng.randint(100, 20_000)
    return Job(
        id=job_id,
        tenant=f"t{job_id % 11}",
        model=model,
        batch_size=batch,
        gpus=gpus,
        iterations=iterations,
        submit_time=submit,
        iter_time_s=rng.uniform(0.05, 1.0),
        iterations_done=rng.uniform(0, iterations / 2) if submit < 0 else 0.0,
    )


def make_snapshot(waiting: int, seed: int = 1) -> Snapshot:
    """512 × 8 GPUs, half busy (exclusive running jobs packed node by node), ``waiting`` jobs."""
    rng = random.Random(seed)
    cluster = Cluster.uniform(512, 8, 49_140)
    sizes, weights = zip(*GANGS, strict=True)
    running: list[RunningJob] = []
    next_gpu = 0
    while next_gpu < cluster.size // 2:
        gpus = min(rng.choice([1, 1, 2, 4, 8]), cluster.size // 2 - next_gpu)
        job = make_job(rng, 1_000_000 + len(running), -rng.uniform(1, 10_000), gpus)
        gpu_ids = tuple(range(next_gpu, next_gpu + gpus))
        running.append(RunningJob(job, Placement(job.id, gpu_ids, job.batch_size, 0.0)))
        next_gpu += gpus
    pending = tuple(
        make_job(rng, i, rng.uniform(0, 600), rng.choices(sizes, weights)[0]) for i in range(waiting)
    )
    return Snapshot(now=600.0, cluster=cluster, pending=pending, running=tuple(running))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per size (default 7)")
    parser.add_argument("--policy", default="sjf-bsbf", choices=POLICY_NAMES)
    parser.add_argument("--explain", action="store_true", help="build Wait reasons (the service path)")
    parser.add_argument(
        "--collector",
        choices=("on", "paused"),
        default="on",
        help="the cyclic garbage collector during each decision: on (the simulator) or paused (the "
        "service's round); default on",
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    profile, profile_name = load_profile()
    print(f"machine: {machine()}")
    print(f"profile: {profile_name}")
    print(f"policy: {args.policy}, explain={args.explain}, garbage collector {args.collector}")
    paused = args.collector == "paused"
    for waiting in (10_000, 1_000):
        snapshot = make_snapshot(waiting)
        policy = get_policy(args.policy)
        if paused:
            gc.disable()
        t0, c0 = time.perf_counter(), time.process_time()
        policy.decide(snapshot, profile, explain=args.explain)  # cold: the policy's caches are empty
        cold, cold_cpu = time.perf_counter() - t0, time.process_time() - c0
        gc.enable()
        times = []
        cpu = []
        for _ in range(args.runs):
            if paused:
                gc.disable()
            t0, c0 = time.perf_counter(), time.process_time()
            decisions = policy.decide(snapshot, profile, explain=args.explain)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            gc.enable()  # what the decision left is collected between decisions
        shared = sum(1 for s in decisions.starts if s.shares)
        print(
            f"{waiting:>6} waiting, {snapshot.cluster.size} GPUs ({len(snapshot.running)} running jobs): "
            f"median {statistics.median(times) * 1e3:.1f} ms, min {min(times) * 1e3:.1f} ms "
            f"(CPU time median {statistics.median(cpu) * 1e3:.1f} ms) over "
            f"{args.runs} runs (first run, cold caches: {cold * 1e3:.1f} ms, "
            f"CPU time {cold_cpu * 1e3:.1f} ms); "
            f"{len(decisions.starts)} starts ({shared} shared), {len(decisions.waits)} wait reasons"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
