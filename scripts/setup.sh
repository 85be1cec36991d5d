#!/usr/bin/env bash
# Create the virtual environment in .venv (if needed) and install the pinned requirements.
# Usage: scripts/setup.sh [requirements file, default requirements-dev.txt]
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    # the comment block above is the help
    sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p'
    exit 0
fi
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
# One stamp per requirements file, named after it and the hash of what it installs
# (requirements.txt is included by requirements-dev.txt), so alternating scripts/demo.sh
# (requirements.txt) and scripts/test.sh (requirements-dev.txt) does not re-run pip each time.
name="$(basename "$req" .txt | tr -c 'A-Za-z0-9_.\n-' '_')"
stamp=".venv/.installed-$name-$(cat requirements.txt "$req" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "==> installing $req into .venv (first run takes a minute)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req"
    # Only this file's stale stamps go (the hash is 16 hex digits, so "requirements" never
    # matches "requirements-dev"); old unnamed stamps (.installed-<hash>) too.
    for old in .venv/.installed-"$name"-???????????????? .venv/.installed-????????????????; do
        [ "$old" = "$stamp" ] || rm -f "$old"
    done
    touch "$stamp"
fi
