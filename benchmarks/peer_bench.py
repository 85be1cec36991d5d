"""Our simulator beside Muri's (and Tiresias') on the same traces and policies, interleaved.

Usage::

    python benchmarks/peer_bench.py PATH/TO/Muri [--tiresias PATH/TO/Tiresias] [--runs 3]
        [--traces muri-sim-trace1.csv,...] [--policies srtf,tiresias] [--preset muri-sim|none]

For each trace and policy, ``--runs`` times in turn: our simulator (``python -m
scheduling.sim``, under ``--preset``, default ``muri-sim``: the peer's model) and Muri's
(``simulator/run_sim.py --scheme=yarn --cluster_spec=cluster_spec/n8g8.csv``, ``shortest`` for
SRTF, ``dlas-gpu`` for Tiresias, as its ``sim_fig9.sh``/``sim_fig10.sh`` run them), each as a
fresh process on the same trace file. Printed: the median wall time of each, the median over
the runs of the ratio peer ÷ ours (wall and CPU time of the child processes), and both average
JCTs (and p99, makespan; the peer's as its ``calc.py`` reads its ``job.csv``). With
``--tiresias``, also FIFO against Tiresias' simulator (``run_sim.py --schedule=fifo
--scheme=yarn``; ours with event rounds, consolidated placement): it reads durations, so it gets
a copy of the trace with ``duration = iterations × iteration_time``, and it is Python 2 code, so
it runs with ``sys.maxint`` defined.

The peers import NumPy and CVXPY at the top but their SRTF, Tiresias and FIFO never use them;
where they are not installed, empty stand-ins (written here, in a temporary folder) satisfy the
imports. Nothing of the peers' code is copied: it runs from the checkouts given. Not a test:
nothing is asserted. Needs ``SHAREWISE_DATA_DIR`` (or ``../shared/data``) for the traces.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import machine  # benchmarks/machine.py

from scheduling.datapaths import REPO_ROOT, trace_path  # noqa: E402

MURI_SCHEDULE = {"srtf": "shortest", "tiresias": "dlas-gpu"}
TRACES = "muri-sim-trace1.csv,muri-sim-trace3.csv,muri-sim-trace4.csv,muri-testbed-400.csv"


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Run ``cmd``; (wall s, CPU s of the child). Raises ``CalledProcessError`` on failure."""
    cpu0, t0 = children_cpu_s(), time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - t0, children_cpu_s() - cpu0


def peer_metrics(job_csv: Path, jct_column: int = -5, end_column: int = 5) -> tuple[float, float, float]:
    """(avg JCT, p99 JCT, makespan) s from a peer's ``job.csv`` as its ``calc.py`` reads them:
    JCT in column -5, end time in column 5, p99 = sorted JCTs at index int(n · 0.99)."""
    with job_csv.open(newline="") as f:
        rows = list(csv.reader(f))[1:]
    jcts = sorted(float(r[jct_column]) for r in rows)
    return sum(jcts) / len(jcts), jcts[int(len(jcts) * 0.99)], max(float(r[end_column]) for r in rows)


def stand_ins(folder: Path, python2: bool = False) -> Path:
    """A folder for PYTHONPATH with empty ``numpy``/``cvxpy`` modules (only where not installed)
    and, for Python 2 code, a ``sitecustomize`` defining ``sys.maxint``."""
    folder.mkdir(parents=True, exist_ok=True)
    if importlib.util.find_spec("numpy") is None:
        (folder / "numpy.py").write_text(
            '"""Stand-in: the peers import NumPy, SRTF/Tiresias never use it."""\n'
        )
    if importlib.util.find_spec("cvxpy") is None:
        stub = '"""Stand-in: only the peers\' Themis uses CVXPY."""\n\n\n'
        (folder / "cvxpy.py").write_text(stub + "class SolverError(Exception):\n    pass\n")
    if python2:
        (folder / "sitecustomize.py").write_text("import sys\n\nsys.maxint = sys.maxsize\n")
    return folder


def durations_copy(trace: Path, out: Path) -> Path:
    """The trace for Tiresias' simulator: its columns, ``duration = iterations × iteration_time``
    (ms, like the other times)."""
    with trace.open(newline="") as f, out.open("w", newline="") as g:
        writer = csv.writer(g)
        writer.writerow(
            ["job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration", "interval"]
        )
        for row in csv.DictReader(f):
            duration = round(int(row["iterations"]) * float(row["iteration_time"]))
            writer.writerow([row["job_id"], row["num_gpu"], row["submit_time"], row["iterations"],
                             row["model_name"], duration, row["interval"]])  # fmt: skip
    return out


def ours_cmd(trace: Path, policy: str, preset: str, out: Path, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "scheduling.sim", "--trace", str(trace), "--cluster", "8x8"]
    cmd += ["--policies", policy, "--no-progress", "--json", str(out), *extra]
    return cmd + (["--preset", preset] if preset != "none" else [])


def ours_metrics(out: Path, policy: str) -> tuple[float, float, float]:
    p = json.loads(out.read_text())["policies"][policy]
    return p["avg_jct_s"], p["p99_jct_s"], p["makespan_s"]


def compare(
    label: str, ours: list[tuple[float, float]], peer: list[tuple[float, float]], m_ours, m_peer
) -> str:
    wall = statistics.median(p[0] / o[0] for o, p in zip(ours, peer, strict=True))
    cpu = statistics.median(p[1] / o[1] for o, p in zip(ours, peer, strict=True))
    ours_s, peer_s = statistics.median(o[0] for o in ours), statistics.median(p[0] for p in peer)
    return (
        f"{label:<34} {ours_s:>8.2f} {peer_s:>8.2f} "
        f"{wall:>7.2f} {cpu:>7.2f}  {m_ours[0]:>12,.0f} {m_peer[0]:>12,.0f} {m_ours[0] / m_peer[0]:>6.3f} "
        f"{m_ours[1] / m_peer[1]:>6.3f} {m_ours[2] / m_peer[2]:>6.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("muri", type=Path, help="a checkout of Rivendile/Muri")
    parser.add_argument("--tiresias", type=Path, help="a checkout of SymbioticLab/Tiresias (adds FIFO)")
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs per pair (medians)")
    parser.add_argument("--traces", default=TRACES, help="trace file names under traces/")
    parser.add_argument("--policies", default="srtf,tiresias", help="of srtf, tiresias")
    parser.add_argument("--preset", default="muri-sim", help="our preset (none: our defaults)")
    args = parser.parse_args()
    if not (args.muri / "simulator" / "run_sim.py").is_file():
        parser.error(f"{args.muri} is not a checkout of Rivendile/Muri (no simulator/run_sim.py in it)")
    if args.tiresias is not None and not (args.tiresias / "simulator" / "run_sim.py").is_file():
        parser.error(f"{args.tiresias} is not a checkout of Tiresias (no simulator/run_sim.py in it)")
    for name in args.traces.split(","):
        if not trace_path(name).is_file():
            parser.error(f"trace {name} not found at {trace_path(name)} (set SHAREWISE_DATA_DIR)")
    # both sides start from compiled byte code: where the environment forbids writing it, every
    # run would otherwise recompile each module it imports (a third of a second for ours)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    sim_dir = args.muri / "simulator"
    compiled = [REPO_ROOT / d for d in ("scheduling", "common")] + [sim_dir]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *map(str, compiled)], check=False)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        peer_env = {**env, "PYTHONPATH": str(stand_ins(tmp / "stubs"))}
        py2_env = {**env, "PYTHONPATH": str(stand_ins(tmp / "stubs2", python2=True))}
        spec = sim_dir / "cluster_spec" / "n8g8.csv"
        print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f}")
        print(
            f"ours: --preset {args.preset}; runs interleaved, {args.runs} per pair; times of whole processes"
        )
        print(
            f"{'trace / policy':<34} {'ours s':>8} {'peer s':>8} {'wall x':>7} {'cpu x':>7}  "
            f"{'avg JCT ours':>12} {'avg JCT peer':>12} {'avg':>6} {'p99':>6} {'mksp':>6}"
        )
        for name in args.traces.split(","):
            trace = trace_path(name)
            for policy in args.policies.split(","):
                ours_t, peer_t = [], []
                for run in range(args.runs):
                    out = tmp / f"ours-{run}.json"
                    ours_t.append(timed(ours_cmd(trace, policy, args.preset, out, []), REPO_ROOT, env))
                    log = tmp / f"muri-{name}-{policy}-{run}"
                    log.mkdir()
                    cmd = [sys.executable, "run_sim.py", f"--cluster_spec={spec}", "--scheme=yarn"]
                    cmd += [
                        f"--trace_file={trace}",
                        f"--schedule={MURI_SCHEDULE[policy]}",
                        f"--log_path={log}",
                    ]
                    peer_t.append(timed(cmd, sim_dir, peer_env))
                m_peer = peer_metrics(log / "job.csv")
                print(compare(f"{name} {policy} (Muri)", ours_t, peer_t, ours_metrics(out, policy), m_peer))
            if args.tiresias is not None and name.startswith("muri-sim"):
                copy = durations_copy(trace, tmp / f"tiresias-{name}")
                fifo = ["--round-interval", "inf", "--round-on-events", "--placement", "consolidated"]
                fifo += ["--percentile", "index"]
                ours_t, peer_t = [], []
                for run in range(args.runs):
                    out = tmp / f"ours-fifo-{run}.json"
                    ours_t.append(timed(ours_cmd(trace, "fifo", "none", out, fifo), REPO_ROOT, env))
                    log = tmp / f"tiresias-{run}-{name}"
                    log.mkdir()
                    cmd = [sys.executable, "run_sim.py", f"--cluster_spec={spec}", "--scheme=yarn"]
                    cmd += [f"--trace_file={copy}", "--schedule=fifo", f"--log_path={log}"]
                    peer_t.append(timed(cmd, args.tiresias / "simulator", py2_env))
                avg, p99, mksp = peer_metrics(log / "job.csv")
                m_peer = (avg / 1000, p99 / 1000, mksp / 1000)  # its times stay in the trace's ms
                print(compare(f"{name} fifo (Tiresias)", ours_t, peer_t, ours_metrics(out, "fifo"), m_peer))


if __name__ == "__main__":
    main()
