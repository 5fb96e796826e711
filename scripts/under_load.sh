#!/usr/bin/env bash
# Runs pytest while N busy loops compete for the machine's cores: the suite must not depend on timing.
#
#   scripts/under_load.sh                          # the whole suite, 24 busy loops
#   scripts/under_load.sh --loops 8 tests/test_e2e.py -x
#   scripts/under_load.sh --runs 3                 # three runs in a row; stops at the first that fails
#
# Every other argument goes to pytest unchanged. The loops are stopped whatever happens (pytest
# failing, Ctrl-C, SIGTERM), and each loop also ends by itself once this script is gone, so a
# `kill -9` of the script leaves nothing spinning. PYTHON picks the interpreter (default: python).
set -euo pipefail

loops=24
runs=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --loops) loops=$2; shift 2 ;;
        --runs) runs=$2; shift 2 ;;
        *) break ;;
    esac
done
[[ "$loops" =~ ^[0-9]+$ && "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "under_load: --loops and --runs take whole numbers" >&2; exit 2; }

pids=()
stop_loops() {
    if [[ ${#pids[@]} -gt 0 ]]; then
        kill "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
    fi
}
trap stop_loops EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

parent=$$
for ((i = 0; i < loops; i++)); do
    # A loop of shell builtins: pure CPU, and it stops when this script is no longer there.
    (while kill -0 "$parent" 2>/dev/null; do :; done) &
    pids+=($!)
done
echo "under_load: $loops busy loops on $(nproc) cores (pids ${pids[*]:0:3}...)" >&2

for ((run = 1; run <= runs; run++)); do
    start=$SECONDS
    status=0
    "${PYTHON:-python}" -m pytest "$@" || status=$?
    echo "under_load: run $run of $runs: pytest exited $status after $((SECONDS - start)) s with $loops busy loops" >&2
    if [[ $status -ne 0 ]]; then
        exit "$status"
    fi
done
