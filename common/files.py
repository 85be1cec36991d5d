"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | Path, text: str, *, private: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same folder and a rename.

    ``private``: the file is readable by its owner only (mode 0600; tokens). The folder is created
    when missing. Raises ``OSError`` when the folder cannot be written or ``path`` cannot be
    replaced (e.g. it is a folder); the temporary file is removed on every failure.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if not private:
            os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # os.umask can only be read by setting it; set it back at once (one thread at start-up or a CLI).
    current = os.umask(0)
    os.umask(current)
    return current
