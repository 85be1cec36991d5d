"""Where Sharewise finds the public traces and profiles it reads but never ships.

``SHAREWISE_DATA_DIR`` overrides the default, which is ``../shared/data`` beside the checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """The folder holding ``traces/``, ``profiles/`` and ``quotas/`` (it may not exist)."""
    env = os.environ.get("SHAREWISE_DATA_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def trace_path(name: str) -> Path:
    """Path of a public trace by file name, e.g. ``trace_path("sjfbsbf-testbed-61.csv")``."""
    return shared_data_dir() / "traces" / name
