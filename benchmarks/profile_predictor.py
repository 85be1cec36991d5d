"""Accuracy of the co-location slowdown predictor, and the speed of profile queries.

Usage::

    python benchmarks/profile_predictor.py [--src PATH] [--folds K] [--lucid] [--repeat N]

Prints (1) the leave-pairs-out error table of ``scheduling.profiles.predictor_fit`` on Gavel's
measured V100 pairs (read from the shared data folder, never shipped), (2) with ``--lucid``, the
check against Lucid's co-location measurements (validation only, non-commercial data): the shipped
table and predictor on Lucid's pairs, and the predictor's form fitted fold by fold on Lucid's own
pairs and tested on the held-out ones, and (3) the
median time of ``TableProfile`` queries as policies issue them (10,000 waiting jobs, memo warm and
cold), with the machine it ran on. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, as the other benchmarks

from machine import machine  # noqa: E402  (benchmarks/machine.py)

from scheduling.core.types import Job  # noqa: E402
from scheduling.datapaths import shared_data_dir  # noqa: E402
from scheduling.profiles import DEFAULT_PROFILE_PATH, import_gavel, load_profile, predictor_fit  # noqa: E402
from scheduling.profiles.lucid import LucidError, lucid_leave_pairs_out, validate_lucid  # noqa: E402

TRACE_MODELS = [
    ("vgg16", 16), ("vgg19", 16), ("resnet18", 128), ("shufflenet_v2_x1_0", 128),
    ("bert", 4), ("gpt2", 4), ("dqn", 128), ("a2c", 64),
]  # fmt: skip


def query_speed(n_jobs: int, repeat: int) -> str:
    """Median wall time per call of iter_time_s, memory_mb and slowdown over ``n_jobs`` jobs."""
    jobs = [
        Job(i, "t", *TRACE_MODELS[i % len(TRACE_MODELS)], 1 + i % 8, 1000, 0.0, 0.1 + (i % 97) / 100)
        for i in range(n_jobs)
    ]
    resident = Job(-1, "t", "resnet18", 128, 8, 1000, 0.0, 0.5)
    lines = [
        f"query speed, {n_jobs:,} waiting jobs × every sub-batch, median of {repeat} runs, loop "
        "included (sub_batches: per job, building the (job, sub-batch) list):"
    ]
    for label, cold in (("cold memo (first round)", True), ("warm memo (later rounds)", False)):
        profile = load_profile(DEFAULT_PROFILE_PATH)
        times: dict[str, list[float]] = {
            "sub_batches": [],
            "iter_time_s": [],
            "memory_mb": [],
            "slowdown": [],
        }
        for _ in range(repeat):
            if cold:
                profile = load_profile(DEFAULT_PROFILE_PATH)
            t0 = time.perf_counter()
            calls = [(j, b) for j in jobs for b in profile.sub_batches(j, 1)]
            times["sub_batches"].append((time.perf_counter() - t0) / len(jobs))
            iter_time_s, memory_mb, slowdown = profile.iter_time_s, profile.memory_mb, profile.slowdown
            t0 = time.perf_counter()
            for j, b in calls:
                iter_time_s(j, b)
            times["iter_time_s"].append((time.perf_counter() - t0) / len(calls))
            t0 = time.perf_counter()
            for j, b in calls:
                memory_mb(j, b)
            times["memory_mb"].append((time.perf_counter() - t0) / len(calls))
            t0 = time.perf_counter()
            for j, b in calls:
                slowdown(j, b, resident, 128)
            times["slowdown"].append((time.perf_counter() - t0) / len(calls))
        cells = ", ".join(f"{name} {statistics.median(v) * 1e9:,.0f} ns" for name, v in times.items())
        lines.append(f"  {label}: {cells} per call")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the tables; returns 2 with a message if the Gavel file is missing or malformed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=shared_data_dir() / "profiles" / "gavel-throughputs.json")
    parser.add_argument("--folds", type=int, default=10)
    parser.add_argument("--lucid", action="store_true", help="also validate against lucid-colocate.csv")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    try:
        data = import_gavel.read_gavel(args.src)
        xi = import_gavel.measured_slowdowns(data)
        print(predictor_fit.report(xi, predictor_fit.leave_pairs_out(xi, args.folds), args.folds))
        if args.lucid:
            lucid = args.src.parent / "lucid-colocate.csv"
            print(validate_lucid(lucid, load_profile(DEFAULT_PROFILE_PATH)))
            print(lucid_leave_pairs_out(lucid, args.folds))
    except (import_gavel.GavelImportError, LucidError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(query_speed(10_000, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
