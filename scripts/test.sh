#!/usr/bin/env bash
# Set up (virtual environment, pinned requirements) and run the whole test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
# Uses SQLite unless DATABASE_URL is set; tests that need PostgreSQL, Redis or a browser skip with
# a reason unless SHAREWISE_REQUIRE_SERVICES=1 (as in .ci/run), where they must run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh requirements-dev.txt
echo "==> ruff"
.venv/bin/ruff check .
echo "==> migrations are up to date"
.venv/bin/python manage.py makemigrations --check --dry-run >/dev/null
echo "==> pytest (database: ${DATABASE_URL:-SQLite})"
exec .venv/bin/python -m pytest "$@"
