"""Atomic file writes: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path


def write_atomic(path: str | Path, text: str, *, private: bool = False) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same folder and a rename.

    ``private``: the file is readable by its owner only (mode 0600; tokens). The folder is created
    when missing. Raises ``OSError`` when the folder cannot be written or ``path`` cannot be
    replaced (e.g. it is a folder); the temporary file is removed on every failure.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_all_atomic({path: text}, private=private)


def write_all_atomic(files: Mapping[Path, str], *, private: bool = False) -> None:
    """Write each ``path → text`` (UTF-8) all-or-nothing.

    Every text is first written to a temporary file beside its target; only when all of them are
    complete are they renamed onto the targets, so a failure while writing (disk full, say) leaves
    every target as it was. The folders must exist. ``private``: mode 0600, else the usual mode
    (0666 less the umask). Raises ``OSError`` (folder missing or read-only, target is a folder,
    disk full…); the temporary files are then removed, and no target has been touched unless the
    failure came from a rename after the first one.
    """
    mode = 0o600 if private else 0o666 & ~_umask()
    staged: list[tuple[str, Path]] = []
    try:
        for target, text in files.items():
            path = Path(target)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            os.fchmod(fd, mode)  # mkstemp creates 0600
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    # os.umask can only be read by setting it; set it back at once (one thread at start-up or a CLI).
    current = os.umask(0)
    os.umask(current)
    return current
