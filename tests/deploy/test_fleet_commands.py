"""The documented ``python -m agent --fleet`` commands can work as written: every node has a token
of its own (``add_node`` and ``load_cluster`` issue one per node and keep only its hash), so a fleet
needs ``--token-file``, the file ``load_cluster --token-file`` writes; one ``--token`` fits one node."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def fleet_commands() -> list[tuple[str, str]]:
    """``(file name, line)`` of each line of the docs that starts a fleet (commands, not prose)."""
    found = []
    for path in DOCS:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.lstrip().startswith("python -m agent --fleet"):
                found.append((path.name, line))
    return found


def test_every_documented_fleet_command_reads_a_token_file() -> None:
    commands = fleet_commands()
    assert commands  # AGENT.md shows one
    for name, line in commands:
        assert "--token-file" in line, f"{name}: {line.strip()}"
