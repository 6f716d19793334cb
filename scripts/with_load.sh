#!/usr/bin/env bash
# Runs the command given with two CPU-bound processes beside it (a loaded machine, as CI or a
# shared box may be), and ends them, by their PIDs, when it ends; exits with its status.
# Usage: scripts/with_load.sh make test
set -u
pids=()
stop() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
}
trap stop EXIT
trap 'exit 130' INT TERM
for _ in 1 2; do
    python3 -c 'while True: pass' &
    pids+=("$!")
done
echo "with_load.sh: busy processes ${pids[*]} beside: $*" >&2
"$@"
