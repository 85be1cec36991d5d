"""Bad arguments to the benchmarks and to ``scripts/demo.sh``'s separate-process mode are one
line and exit 2, never a traceback (each case below ended in one, ran on nonsense, or ran the
argument as Python code before: a fresh user's trial found them); and that mode hands its
processes unbuffered output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["bench_sim.py", "--runs", "-1"], "argument --runs: must be at least 1, got -1"),
        (["bench_sim.py", "--policies", "bogus"], "argument --policies: unknown policy 'bogus'"),
        (["bench_scaling.py", "--policies", "bogus"], "argument --policies: unknown policy 'bogus'"),
        (["bench_scaling.py", "--sizes", "abc"], "a job count must be an integer ≥ 1 or 'all', got 'abc'"),
        # ran before, on the trace less its last 5 jobs (a slice)
        (["bench_scaling.py", "--sizes", "-5"], "a job count must be an integer ≥ 1 or 'all', got '-5'"),
        (["bench_scaling.py", "--runs", "0"], "argument --runs: must be at least 1, got 0"),
        (
            ["gains_table.py", "--presets", "bogus"],
            "argument --presets: unknown 'bogus'; one or more of ours",
        ),
        (["gains_table.py", "--traces", "nonexistent"], "--traces: each item is NAME:NODESxGPUS"),
        (["derive_launch_overhead.py", "/nonexistent"], "error: cannot read Muri's testbed results under"),
        (["bench_cache.py", "--cache-url", "foo"], "argument --cache-url: expected redis://host:port/db"),
        (["bench_post.py", "--compare", "bogus"], "argument --compare: invalid choice: 'bogus'"),
        (["bench_post.py", "--compare", "one-read", "--database-url", "x"], "--database-url: expected"),
    ],
)
def test_a_bad_benchmark_argument_is_one_line(argv: list[str], said: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / argv[0]), *argv[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SHAREWISE_DATA_DIR": str(tmp_path / "no-data")},
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert said in result.stderr.strip().splitlines()[-1], result.stderr


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--speedup", "0"], "error: --speedup must be a positive number, got '0'"),  # ZeroDivisionError
        (["--speedup", "abc"], "error: --speedup must be a positive number, got 'abc'"),  # NameError
        # run as Python code before (``python -c "print(60 / $speedup)"``)
        (["--speedup", "__import__('os')"], "error: --speedup must be a positive number"),
        (["--speedup", "-5"], "error: --speedup must be a positive number, got '-5'"),
        (["--port", "-1"], "error: --port must be 1 to 65535"),  # gunicorn's OverflowError
        (["--port", "abc"], "error: --port must be 1 to 65535"),
    ],
)
def test_the_separate_process_demo_checks_its_options_first(
    argv: list[str], said: str, tmp_path: Path
) -> None:
    """With REDIS_URL and DATABASE_URL (the Procfile's processes), from a scratch copy of
    scripts/: refused before anything is installed or started."""
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    result = separate_process_demo(tmp_path, *argv)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and said in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scripts"]  # no .venv, no var/


def test_the_separate_processes_write_their_lines_unbuffered(tmp_path: Path) -> None:
    """Through honcho's pipes each Python process buffered its output: Celery's start banners
    came out after the demo's results. Run with stand-ins for the set-up, Python and honcho (on
    the PATH the script puts first), the script hands honcho ``PYTHONUNBUFFERED=1``."""
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    (tmp_path / "scripts" / "setup.sh").write_text("#!/usr/bin/env bash\nexit 0\n")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in [("python", "exit 0"), ("honcho", 'echo "PYTHONUNBUFFERED=${PYTHONUNBUFFERED:-}"')]:
        (bin_dir / name).write_text(f"#!/usr/bin/env bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    result = separate_process_demo(tmp_path, "--exit-when-done", SECRET_KEY="x" * 50)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "PYTHONUNBUFFERED=1"


def separate_process_demo(cwd: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``bash scripts/demo.sh ARGV`` in ``cwd`` with REDIS_URL and DATABASE_URL set (its
    separate-process mode; nothing listens at either) and ``env`` added, PYTHONUNBUFFERED unset."""
    base = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    urls = {"REDIS_URL": "redis://127.0.0.1:1/0", "DATABASE_URL": "postgres://x@127.0.0.1:1/x"}
    return subprocess.run(
        ["bash", "scripts/demo.sh", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        env={**base, **urls, **env},
    )
