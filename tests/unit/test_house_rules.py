"""The house rules a tool can check (STYLE.md, issue "One house for the live driver"): no project
file over 600 lines (migrations aside) and no module using another module's underscore names."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Top-level packages of the project (tests are checked for neither rule: fixtures may peek).
PACKAGES = ("agent", "cluster", "common", "config", "demo", "frontend", "scheduling")
MAX_LINES = 600
#: The client package's root (``client/src/sharewise``, installed on its own): the same rules.
CLIENT_ROOT = ROOT / "client" / "src"


def project_files() -> list[Path]:
    """Every ``.py`` file of the project's packages, migrations aside."""
    files = [f for pkg in PACKAGES for f in sorted((ROOT / pkg).rglob("*.py")) if "migrations" not in f.parts]
    assert len(files) > 100, "the project's packages were not found"
    return files


def module_name(path: Path, root: Path = ROOT) -> str:
    """``scheduling/core/types.py`` → ``scheduling.core.types`` (a package's ``__init__`` → the package)."""
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


def private_uses(path: Path, root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Where ``path`` imports or uses an underscore name of another project module: ``from pkg.m
    import _x`` and ``m._x`` for a project module imported as ``m``. Dunder names are public."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path, root)
    hits: list[str] = []
    aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] not in packages:
                continue
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and node.module != me:
                    hits.append(
                        f"{path.relative_to(root)}:{node.lineno} imports {alias.name} from {node.module}"
                    )
                aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in packages:
                    aliases.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
        ):
            hits.append(f"{path.relative_to(root)}:{node.lineno} uses {node.value.id}.{node.attr}")
    return hits


def test_the_private_name_check_sees_both_forms(tmp_path: Path) -> None:
    sample = tmp_path / "common" / "sample.py"
    sample.parent.mkdir()
    sample.write_text(
        "from scheduling.core import sharing\n"
        "from scheduling.core.sharing import _pair_times, __version__\n"
        "x = sharing._pair_times\n",
        encoding="utf-8",
    )
    hits = private_uses(sample, tmp_path)
    assert [h.split(" ", 1)[1] for h in hits] == [
        "imports _pair_times from scheduling.core.sharing",
        "uses sharing._pair_times",
    ]


def test_no_module_uses_another_modules_private_names() -> None:
    assert [hit for f in project_files() for hit in private_uses(f)] == []


def test_no_project_file_is_over_600_lines() -> None:
    long = {
        str(f.relative_to(ROOT)): n for f in project_files() if (n := f.read_text().count("\n")) > MAX_LINES
    }
    assert long == {}


def test_the_client_keeps_the_same_rules() -> None:
    files = sorted((CLIENT_ROOT / "sharewise").rglob("*.py"))
    assert len(files) >= 5, "the client package was not found"
    assert [hit for f in files for hit in private_uses(f, CLIENT_ROOT, ("sharewise",))] == []
    long = {f.name: n for f in files if (n := f.read_text().count("\n")) > MAX_LINES}
    assert long == {}
