#!/usr/bin/env bash
# Set up (virtual environment, pinned requirements) and run the checks, then the whole test
# suite: ruff (lint and format), mypy, the import contracts, the migrations check, then pytest
# (its -q output prints a "u" per subtest, beside the "." per test).
# Usage: scripts/test.sh [pytest arguments], e.g. scripts/test.sh tests/unit -x
# Uses SQLite unless DATABASE_URL is set; tests that need PostgreSQL, Redis or a browser skip with
# a reason unless SHAREWISE_REQUIRE_SERVICES=1 (as in .ci/run), where they must run.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    # the comment block above is the help
    sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p'
    exit 0
fi
cd "$(dirname "$0")/.."
scripts/setup.sh requirements-dev.txt
echo "==> ruff (lint and format)"
.venv/bin/ruff check .
.venv/bin/ruff format --check --quiet . || { echo "files above differ from ruff format: run .venv/bin/ruff format ." >&2; exit 1; }
echo "==> mypy (the core, the simulator, the agent, common/)"
.venv/bin/mypy
echo "==> import contracts (.importlinter)"
.venv/bin/lint-imports --no-cache --no-logo
echo "==> migrations are up to date"
.venv/bin/python manage.py makemigrations --check --dry-run >/dev/null
echo "==> pytest (database: ${DATABASE_URL:-SQLite})"
exec .venv/bin/python -m pytest "$@"
