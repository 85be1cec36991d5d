"""scripts/setup.sh keeps one install stamp per requirements file: alternating scripts/demo.sh
(requirements.txt) and scripts/test.sh (requirements-dev.txt) runs pip once per file, not each time.
Run in a scratch copy whose ``.venv/bin/python`` only logs its arguments (no real pip)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_setup_keeps_one_stamp_per_requirements_file(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    (tmp_path / "requirements.txt").write_text("a==1\n")
    (tmp_path / "requirements-dev.txt").write_text("-r requirements.txt\nb==2\n")
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "pip.log"
    fake = venv / "bin" / "python"
    fake.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\n')
    fake.chmod(0o755)
    (venv / ".installed-0123456789abcdef").touch()  # an old unnamed stamp

    def setup(*args: str) -> None:
        env = {**os.environ, "PYTHON": sys.executable}  # the version check needs Python 3.11+
        subprocess.run(
            ["bash", "scripts/setup.sh", *args], cwd=tmp_path, env=env, check=True, capture_output=True
        )

    def installs() -> list[str]:
        return [line.split()[-1] for line in log.read_text().splitlines() if "-r" in line.split()]

    for req in ("requirements.txt", "requirements-dev.txt", "requirements.txt", "requirements-dev.txt"):
        setup(req)
    assert installs() == ["requirements.txt", "requirements-dev.txt"]  # once each, not four times
    stamps = sorted(p.name.rsplit("-", 1)[0] for p in venv.glob(".installed-*"))
    assert stamps == [".installed-requirements", ".installed-requirements-dev"]
    # A changed requirements.txt re-installs both (requirements-dev.txt includes it), once each,
    # and replaces each file's stamp instead of adding one.
    (tmp_path / "requirements.txt").write_text("a==2\n")
    setup("requirements.txt")
    setup()  # default: requirements-dev.txt
    setup("requirements.txt")
    assert installs()[2:] == ["requirements.txt", "requirements-dev.txt"]
    assert len(list(venv.glob(".installed-*"))) == 2
