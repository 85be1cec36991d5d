"""The live demo end to end, in a subprocess (its threads need a real database file): a tiny
synthetic workload, a high speedup, ``--exit-when-done``. What must hold is structural — every job
finishes through the REST API, the table has the live and the simulated row, the fidelity line is
printed — not a timing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
           "SHAREWISE_DATA_DIR": str(tmp_path / "no-data"), "REDIS_URL": "", "CACHE_URL": "locmemcache://"}
    return subprocess.run([sys.executable, "manage.py", "demo", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)


def test_demo_replays_a_synthetic_workload_and_compares_with_the_simulator(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--synthetic-jobs", "6", "--speedup", "300", "--port", "0",
                    "--exit-when-done", "--no-progress", "--timeout", "180")
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "public data not found" in out and "synthetic workload of 6 jobs" in out
    assert re.search(r"dashboard: http://127\.0\.0\.1:\d+/dashboard/ +\(login: admin / \S+\)", out)
    rows = {line.split()[0] + " " + line.split()[1]: line.split() for line in out.splitlines()
            if line.startswith("sjf-bsbf (")}
    assert set(rows) == {"sjf-bsbf (live)", "sjf-bsbf (simulator)"}
    # columns: policy (2 words), jobs, ..., unfinished last: all 6 jobs finished in both runs
    assert rows["sjf-bsbf (live)"][2] == "6" and rows["sjf-bsbf (live)"][-1] == "0"
    assert rows["sjf-bsbf (simulator)"][2] == "6" and rows["sjf-bsbf (simulator)"][-1] == "0"
    ratio = float(re.search(r"fidelity: live average JCT / simulated average JCT = ([0-9.]+)", out)[1])
    assert ratio > 0


def test_demo_refuses_bad_options_with_one_line(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--speedup", "-1", "--exit-when-done")
    assert done.returncode != 0
    assert "--speedup must be a positive number" in done.stderr and "Traceback" not in done.stderr
    done = run_demo(tmp_path, "--cluster", "4y8")
    assert done.returncode != 0 and "bad --cluster" in done.stderr and "Traceback" not in done.stderr
