"""The one line every benchmark prints about the machine it ran on (numbers mean little without it)."""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path


def machine() -> str:
    """CPU model (from /proc/cpuinfo where Linux has it), cores, OS and architecture, Python."""
    model = platform.processor() or "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"model name\s*:\s*(.+)", cpuinfo.read_text())
        model = found.group(1).strip() if found else model
    return (
        f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}"
    )


if __name__ == "__main__":  # the line itself: python benchmarks/machine.py
    import argparse

    argparse.ArgumentParser(description="Print the line each benchmark prints of this machine.").parse_args()
    print(machine())
