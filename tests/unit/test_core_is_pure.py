"""``scheduling/core`` is pure Python: no module under it imports Django (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import scheduling.core

CORE = Path(scheduling.core.__file__).resolve().parent


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module ``path`` imports (``import x.y`` and ``from x.y import z``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "__import__" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value.split(".")[0])
    return names


def test_the_check_sees_django(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    source = "import os\nfrom django.db import models\nimport rest_framework.views\n"
    sample.write_text(source, encoding="utf-8")
    assert imported_modules(sample) == {"os", "django", "rest_framework"}


def test_no_core_module_imports_django() -> None:
    files = sorted(CORE.rglob("*.py"))
    assert any(f.name == "types.py" for f in files) and any(f.parent.name == "policies" for f in files)
    offenders = {
        str(f.relative_to(CORE)): sorted(m for m in imported_modules(f) if m in {"django", "rest_framework"})
        for f in files
    }
    assert {f: m for f, m in offenders.items() if m} == {}
