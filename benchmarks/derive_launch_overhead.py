"""Derive the relaunch overhead per model from Muri's published testbed results.

Usage::

    python benchmarks/derive_launch_overhead.py PATH/TO/Muri [--factor 1.015]

Muri's testbed (Zhao et al., SIGCOMM'22; repository Rivendile/Muri, Apache-2.0) ran the 400-job
trace ``cluster_exp/trace-data/cluster_trace.csv`` (our ``muri-testbed-400.csv``) on 8 × 8 V100
and published each job's record in ``cluster_exp/results/<scheduler>/job.csv``: first start,
end, and ``job_counter``, the number of times the job was launched. A job launched exactly once
ran from its first start to its end without any re-plan, so ``end − start = overhead +
iterations × iteration_time × factor`` (``factor``: real ÷ trace iteration time, 1.015 in
Muri's simulator, ``simulator/jobs.py``). This prints, per model, the median of ``(end − start)
− iterations × iteration_time × factor`` over those jobs of the four exclusive schedulers'
runs (SRTF, SRSF, Tiresias, Themis; Muri-S/L pack jobs, so their times are not a job's own), and
over all of them — the table ``scheduling.sim.fidelity.MURI_TESTBED``. Nothing is copied from
that repository: it is read from the checkout given.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

RUNS = ("SRTF", "SRSF", "tiresias", "themis")


def overheads(muri: Path, factor: float) -> dict[str, list[float]]:
    """Model → the overheads (s) of the jobs launched once, over :data:`RUNS`."""
    trace_path = muri / "cluster_exp" / "trace-data" / "cluster_trace.csv"
    with trace_path.open(newline="") as f:
        trace = {row["job_id"]: row for row in csv.DictReader(f)}
    out: dict[str, list[float]] = defaultdict(list)
    for run in RUNS:
        with (muri / "cluster_exp" / "results" / run / "job.csv").open(newline="") as f:
            for row in csv.DictReader(f):
                if int(row["job_counter"]) != 1:
                    continue
                job = trace[row["job_id"]]
                ideal_s = int(job["iterations"]) * float(job["iteration_time"]) / 1000.0 * factor
                out[job["model_name"]].append(float(row["end_time"]) - float(row["start_time"]) - ideal_s)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("muri", type=Path, help="a checkout of Rivendile/Muri")
    parser.add_argument("--factor", type=float, default=1.015, help="real ÷ trace iteration time")
    args = parser.parse_args()
    if not (math.isfinite(args.factor) and args.factor > 0):
        parser.error(f"--factor must be a positive number, got {args.factor}")
    try:
        table = overheads(args.muri, args.factor)
    except (OSError, KeyError, ValueError) as exc:  # not a Muri checkout, or one of other files
        parser.exit(2, f"error: cannot read Muri's testbed results under {args.muri}: {exc}\n")
    everything = [v for values in table.values() for v in values]
    print(f"{'model':<20} {'jobs':>5} {'median s':>9} {'min s':>8} {'max s':>8}")
    for model, values in sorted(table.items()):
        median = statistics.median(values)
        print(f"{model:<20} {len(values):>5} {median:>9.1f} {min(values):>8.1f} {max(values):>8.1f}")
    print(f"{'(all)':<20} {len(everything):>5} {statistics.median(everything):>9.1f}")


if __name__ == "__main__":
    main()
