#!/usr/bin/env bash
# Sets everything up and runs the example pipeline W1 (examples/w1_window_counts.py) on the embedded
# default: local TaskManagers, checkpoints and output in local directories. Extra arguments go to
# `sluice run`, e.g. --arg n=2000000.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-system-deps.sh
scripts/setup.sh
out="${SLUICE_EXAMPLE_OUT:-/tmp/sluice-example/out}"
chk="${SLUICE_EXAMPLE_CHECKPOINTS:-/tmp/sluice-example/checkpoints}"
rm -rf "$out"
.venv/bin/sluice run examples/w1_window_counts.py \
    --arg n=2000000 --arg "out=$out" --parallelism 2 \
    --checkpoint-dir "file://$chk" --checkpoint-interval 1s "$@"
echo "output: $(cat "$out"/part-* | wc -l) windowed counts in $out" >&2
