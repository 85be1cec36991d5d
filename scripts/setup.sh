#!/usr/bin/env bash
# Create the virtual environment in .venv (if needed) and install the pinned requirements.
# Usage: scripts/setup.sh [requirements file, default requirements-dev.txt]
set -euo pipefail
cd "$(dirname "$0")/.."
req="${1:-requirements-dev.txt}"
py="${PYTHON:-python3}"
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "Sharewise needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    echo "==> creating virtual environment in .venv"
    "$py" -m venv .venv
fi
stamp=".venv/.installed-$(cat requirements.txt "$req" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "==> installing $req into .venv (first run takes a minute)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req"
    rm -f .venv/.installed-*
    touch "$stamp"
fi
