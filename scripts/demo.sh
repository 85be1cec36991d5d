#!/usr/bin/env bash
# Set up everything on a fresh machine and run the demo on the embedded default (SQLite, no
# services): a 4 x 8-GPU cluster of 49,140 MB (the SJF-BSBF authors' testbed), two tenants, the
# simulator's comparison of all six policies on a real trace, then the web service.
# Usage: scripts/demo.sh [--trace PATH] [--port 8000] [--no-serve]
set -euo pipefail
cd "$(dirname "$0")/.."
port=8000
serve=1
trace=""
while [ $# -gt 0 ]; do
    case "$1" in
        --trace) trace="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --no-serve) serve=0; shift ;;
        *) echo "unknown option: $1 (use --trace PATH, --port N, --no-serve)" >&2; exit 2 ;;
    esac
done

scripts/setup.sh requirements.txt
py=.venv/bin/python
mkdir -p var
# a fresh demo database each run, so the demo always starts from the same state
rm -f var/demo.sqlite3
export DATABASE_URL="sqlite:///var/demo.sqlite3"

echo "==> database ($DATABASE_URL)"
$py manage.py migrate --noinput >/dev/null
$py manage.py load_cluster 4x8 --gpu-memory-mb 49140 --gpu-type v100
for tenant in team-a team-b; do
    $py manage.py create_tenant "$tenant" --quota-gpus 16
done

if [ -z "$trace" ]; then
    trace="$($py -c 'from scheduling.datapaths import trace_path; print(trace_path("sjfbsbf-testbed-61.csv"))')"
fi
if [ -f "$trace" ]; then
    echo "==> simulating $trace on 4x8 GPUs with every policy"
    $py -m scheduling.sim --trace "$trace" --cluster 4x8 --gpu-memory-mb 49140 \
        --policies fifo,sjf,srtf,tiresias,sjf-ffs,sjf-bsbf \
        --json var/demo-report.json --html var/demo-report.html
    echo "    report: var/demo-report.html (open it in a browser), numbers: var/demo-report.json"
else
    echo "==> public trace not found at $trace (the shared data folder is absent; set"
    echo "    SHAREWISE_DATA_DIR or pass --trace PATH): skipping the simulation"
fi

if [ "$serve" = 1 ]; then
    echo "==> serving on http://127.0.0.1:$port/  (API docs: http://127.0.0.1:$port/api/docs/, Ctrl-C stops)"
    exec $py manage.py runserver "127.0.0.1:$port"
fi
