"""Every script in scripts/ answers ``--help`` with its usage, and does nothing else (run from a
scratch copy: no virtual environment, database or process appears)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p.name for p in (REPO / "scripts").glob("*.sh"))


def test_the_scripts_are_found() -> None:
    assert {"demo.sh", "setup.sh", "test.sh"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_nothing_runs(name: str, flag: str, tmp_path: Path) -> None:
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    result = subprocess.run(
        ["bash", f"scripts/{name}", flag], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert f"Usage: scripts/{name}" in result.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scripts"]  # no .venv, no var/
