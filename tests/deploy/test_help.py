"""Every file of ``benchmarks/`` and every management command of the project answers ``--help``
with exit status 0 and its usage, doing nothing else (the shell scripts: ``test_scripts.py``); a
module the benchmarks import says it is one."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

REPO = Path(__file__).resolve().parents[2]
#: Every file of benchmarks/: the benchmarks, and the modules they import (``kueue_shape.py``
#: used to fail with a traceback, the others to print nothing).
BENCHMARKS = sorted(p.name for p in (REPO / "benchmarks").glob("*.py"))
#: The modules among them that run nothing (``machine.py`` prints its line, ``kueue_shape.py``
#: its workload).
MODULES = {"admission.py", "cli_args.py", "fresh_db.py", "sampler.py", "sql_timing.py", "thread_cpu.py"}
PROJECT_APPS = {"cluster", "scheduling", "demo", "frontend"}
COMMANDS = sorted(name for name, app in get_commands().items() if app in PROJECT_APPS)


def test_the_scripts_and_commands_are_found() -> None:
    assert {"bench_dashboard.py", "bench_round.py", "bench_sim.py", "gains_table.py"} <= set(BENCHMARKS)
    assert {"machine.py", "kueue_shape.py"} | MODULES <= set(BENCHMARKS)
    assert {"demo", "run_scheduler", "simulate", "create_tenant", "add_node", "load_cluster"} <= set(COMMANDS)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_a_benchmark_answers_help(name: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {name} ")
    said = " ".join(result.stdout.split())  # argparse wraps the description
    assert (f"({name} is a module the benchmarks import, not a benchmark: it runs nothing.)" in said) == (
        name in MODULES
    )
    assert list(tmp_path.iterdir()) == []  # wrote nothing where it ran
    source = (REPO / "benchmarks" / name).read_text(encoding="utf-8")
    if "description=__doc__" in source:  # the docstring's whole first paragraph, not its first line
        doc = ast.get_docstring(ast.parse(source))
        assert doc is not None
        first = " ".join(doc.split("\n\n")[0].split())
        assert first.replace("%", "") in said.replace("%", ""), first


@pytest.mark.parametrize("name", COMMANDS)
def test_a_management_command_answers_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    # the command's own parser, as `manage.py NAME --help` builds it (not ManagementUtility, whose
    # django.setup() would bind the logging handlers to this test's captured stderr)
    command = load_command_class(get_commands()[name], name)
    with pytest.raises(SystemExit) as exited:
        command.create_parser("manage.py", name).parse_args(["--help"])
    assert exited.value.code in (0, None)
    out = capsys.readouterr().out
    assert out.startswith(f"usage: manage.py {name} ")
    assert "options:" in out
