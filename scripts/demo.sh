#!/usr/bin/env bash
# The live demo on a fresh machine: virtual environment, install, a fresh SQLite database, a
# 4 x 8-GPU cluster of 49,140 MB (the SJF-BSBF authors' testbed), two tenants, and a replay of
# ../shared/data/traces/sjfbsbf-testbed-61.csv through the REST API, 50x faster than real time
# (about 3.5 minutes): rounds and emulated agents run in-process, the dashboard is live at the
# printed URL, and at the end the live metrics are printed beside the simulator's for the same
# input. Without ../shared/data it says so and replays a built-in synthetic workload.
#
# With REDIS_URL and DATABASE_URL set, the same demo runs as separate processes (Procfile, honcho):
# web (gunicorn), Celery worker and beat (rounds), the emulated agent fleet, and the replay.
#
# Usage: scripts/demo.sh [--trace PATH] [--port 8000] [--speedup 50] [--exit-when-done] [--flush]
#   --flush: (multi-process mode) empty the database named by DATABASE_URL first.
set -euo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    # the comment block above is the help
    sed -n '2,/^[^#]/p' "$0" | sed -n 's/^# \{0,1\}//p'
    exit 0
fi
cd "$(dirname "$0")/.."
port=8000
speedup=50
args=()
flush=""
while [ $# -gt 0 ]; do
    case "$1" in
        --trace) args+=(--trace "$2"); shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --speedup) speedup="$2"; shift 2 ;;
        --exit-when-done) args+=(--exit-when-done); shift ;;
        --flush) flush="--flush"; shift ;;
        *) echo "unknown option: $1 (use --trace PATH, --port N, --speedup X, --exit-when-done, --flush)" >&2
           exit 2 ;;
    esac
done

if [ -n "${REDIS_URL:-}" ] && [ -n "${DATABASE_URL:-}" ]; then
    # Separate processes (REDIS_URL and DATABASE_URL set): the options are checked here, before
    # anything is installed (the embedded demo checks its own); each process reads them.
    if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
        echo "error: --port must be 1 to 65535 (the separate processes must know it), got '$port'" >&2
        exit 2
    fi
    # the speed-up is read as a number, never run as code
    number='import math, sys; v = float(sys.argv[1]) if sys.argv[1].strip() else math.nan'
    if ! interval="$(python3 -c "$number"'; sys.exit(1) if not (math.isfinite(v) and v > 0) else print(60 / v)' \
        "$speedup" 2>/dev/null)"; then
        echo "error: --speedup must be a positive number, got '$speedup'" >&2
        exit 2
    fi
fi

scripts/setup.sh requirements.txt
export PATH="$PWD/.venv/bin:$PATH"
mkdir -p var

if [ -n "${REDIS_URL:-}" ] && [ -n "${DATABASE_URL:-}" ]; then
    # Separate processes: rounds every 60 s of trace time by Celery beat, agents via Redis.
    export SHAREWISE_PORT="$port" SHAREWISE_SPEEDUP="$speedup"
    export SHAREWISE_ROUND_INTERVAL_S="$interval"
    export SHAREWISE_NODE_TOKEN_FILE="var/node-tokens.json"
    export SHAREWISE_DEMO_ARGS="${args[*]:-} $flush"
    # web, worker and beat run as production, which needs a key of its own: one for this run
    export SECRET_KEY="${SECRET_KEY:-$(python -c "import secrets; print(secrets.token_urlsafe(50))")}"
    # ...and sends its cookies over HTTPS only; the demo's dashboard is plain HTTP on this machine
    export SHAREWISE_SECURE_COOKIES="${SHAREWISE_SECURE_COOKIES:-0}"
    # each process's lines as they happen: through honcho's pipes Python buffers its output, and
    # Celery's start banners came out after the demo's results
    export PYTHONUNBUFFERED=1
    rm -f "$SHAREWISE_NODE_TOKEN_FILE"
    echo "==> database ($DATABASE_URL), broker ($REDIS_URL)"
    python manage.py migrate --noinput >/dev/null
    python manage.py collectstatic --noinput >/dev/null
    echo "==> honcho: web, worker, beat, agents, demo (Ctrl-C stops them all)"
    exec honcho start web worker beat agents demo
fi

# Embedded: one process, no broker, a fresh SQLite database each run (the same start every time).
unset REDIS_URL
rm -f var/demo.sqlite3 var/demo.sqlite3-wal var/demo.sqlite3-shm
export DATABASE_URL="sqlite:///var/demo.sqlite3"
exec python manage.py demo --port "$port" --speedup "$speedup" ${args[@]+"${args[@]}"}
