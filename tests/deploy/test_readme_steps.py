"""The README's set-up steps ("Running the services") work as written: replayed in a scratch copy
of the repository on a fresh SQLite database, each step succeeds; run again, ``load_cluster``
succeeds (it says what exists) and the two that create accounts refuse with one line; the
dashboard's and the API docs' static files are collected, and the agents' token file is private.
Only the interactive step is fed (``createsuperuser --noinput``, as a script would)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Steps that create an account: run again, they refuse (one line, exit status 1).
CREATING = ("createsuperuser", "create_tenant")

pytestmark = pytest.mark.slow


def setup_steps() -> list[list[str]]:
    """The commands of the README's "Set-up, once per deployment" block, comments dropped."""
    text = (REPO / "README.md").read_text()
    block = text.split("Set-up, once per deployment", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    steps = []
    for line in block.splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            steps.append(shlex.split(command))
    return steps


def test_the_steps_are_the_ones_a_deployment_needs() -> None:
    manage = [s[2] for s in setup_steps() if s[:2] == ["python", "manage.py"]]
    assert manage == ["migrate", "collectstatic", "createsuperuser", "load_cluster", "create_tenant"]
    assert setup_steps()[0] == ["cp", ".env.example", ".env"]


def test_the_steps_replayed_from_a_scratch_copy(tmp_path: Path) -> None:
    copy = tmp_path / "sharewise"
    shutil.copytree(
        REPO, copy, ignore=shutil.ignore_patterns(".git", ".venv", "var", "__pycache__", "*.sqlite3", ".env")
    )
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DATABASE_URL", "REDIS_URL", "CACHE_URL"))
        },
        "DJANGO_SUPERUSER_PASSWORD": "a-long-test-password-1",
        "DJANGO_SUPERUSER_EMAIL": "admin@example.org",
        "DJANGO_SUPERUSER_USERNAME": "admin",
    }
    for again in (False, True):
        outputs = []
        for step in setup_steps():
            if step[0] == "cp":
                if not (copy / ".env").exists():
                    shutil.copy(copy / step[1], copy / step[2])
                    # this machine's settings instead of the containers' host names
                    lines = [
                        line
                        for line in (copy / ".env").read_text().splitlines()
                        if not re.match(r"(DATABASE_URL|REDIS_URL|CACHE_URL)=", line)
                    ]
                    (copy / ".env").write_text("\n".join([*lines, "DATABASE_URL=sqlite:///db.sqlite3", ""]))
                continue
            if again and step[2] not in (*CREATING, "load_cluster"):
                continue  # migrate and collectstatic: Django's own commands, idempotent by design
            argv = [sys.executable, *step[1:]] if step[0] == "python" else step
            if "createsuperuser" in step:
                argv += ["--noinput"]
            result = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=120)
            if again and step[2] in CREATING:
                assert result.returncode == 1 and result.stderr.startswith("CommandError: "), result.stderr
                assert len(result.stderr.strip().splitlines()) == 1
                continue
            assert result.returncode == 0, f"{step}: {result.stderr[-2000:]}"
            outputs.append((step, result.stdout))
        tokens = copy / "var" / "node-tokens.json"
        assert stat.S_IMODE(tokens.stat().st_mode) == 0o600
    static = copy / "var" / "static"
    assert (static / "drf_spectacular_sidecar" / "swagger-ui-dist" / "swagger-ui.css").exists()
    assert any(static.joinpath("frontend").rglob("*.css")), "the dashboard's styles were not collected"
    last = dict((s[2], out) for s, out in outputs if s[:2] == ["python", "manage.py"])
    assert "Already registered, left as they are: node-00" in last["load_cluster"]
