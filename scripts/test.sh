#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the whole test suite:
#   system packages (PostgreSQL, Java), the locked Python environment, the Kubernetes test binaries
#   (built once from the Go module proxy and cached under ~/.cache/sluice/), then lint, types and layer
#   contracts beside the unit tests, then the integration and end-to-end tests, each tier as its own
#   pytest run; as root, the real node (image, cluster) is prepared in the background meanwhile.
#
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    lint, types, layer contracts and the unit tier: the developer's loop
#
# Extra arguments go to every pytest run (pytest's exit code 5, nothing collected, then counts as
# passed for a tier the selection leaves empty). The set-up time is printed on its own line
# (`test.sh: set-up took Ns`), and the slowest 30 tests of the whole run at the end, so where the time
# goes stays visible.
# Exits with the first failing step's code; a failing test tier does not stop the later tiers (a lint,
# type or contract failure stops the run after the unit tier).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=false
if [ "${1:-}" = "--quick" ]; then
    quick=true
    shift
fi

started=$(date +%s)
scripts/install-system-deps.sh
scripts/setup.sh
if ! $quick; then
    # Builds the Kubernetes test binaries once (minutes, cold) or finds them (instant, warm); the test
    # fixtures only look them up.
    scripts/k8s-binaries.sh >/dev/null
    scripts/kafka-jars.sh >/dev/null  # the Kafka 4 test broker's jars, from Maven Central once
fi
echo "test.sh: set-up took $(( $(date +%s) - started ))s" >&2

reports=$(mktemp -d)
node_session=""
# stop_node_session: ends the real node's session process (it takes the node down, then gives the
# node's lease back) and waits for it.
stop_node_session() {
    if [ -n "$node_session" ]; then
        kill -TERM "$node_session" 2>/dev/null || true
        wait "$node_session" 2>/dev/null || true
        node_session=""
    fi
}
trap 'stop_node_session; rm -rf "$reports"' EXIT
if ! $quick && [ "$(id -u)" -eq 0 ]; then
    # The real one-node cluster's binaries (tests/e2e/_real_node.py), on a line of their own: a cold
    # build takes many minutes, a warm one finds them in the cache. Without root the real-node tests
    # cannot run, and say so.
    node_started=$(date +%s)
    scripts/k8s-node-binaries.sh >/dev/null
    echo "test.sh: real-node binaries took $(( $(date +%s) - node_started ))s" >&2
    # Then, in the background, the image (built from the Dockerfile, cached), the node up and the image
    # imported, and the node's lease held until the e2e tier has ended (tests/e2e/_node_session.py):
    # beside the lint, type and unit steps, which keep one core busy, not on the e2e tier's tail. It
    # prints its own time ("real node ready beside the other tiers in Ns").
    PYTHONPATH=tests .venv/bin/python -m e2e._node_session "$reports/real-node.json" &
    node_session=$!
    export SLUICE_REAL_NODE_SESSION="$reports/real-node.json" SLUICE_REAL_NODE_SESSION_PID="$node_session"
fi

status=0

# children_cpu: writes to $reports/cpu the CPU seconds (user + system) that this shell's finished
# children have used so far. `times` must run in this shell: a $(...) subshell has no children of its own.
children_cpu() {
    times >"$reports/times"
    awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, t, "m"); sub("s", "", t[2]); s += t[1] * 60 + t[2] }
                   printf "%.0f\n", s }' "$reports/times" >"$reports/cpu"
}

# tier NAME PATH WORKERS: runs one tier; a failure is remembered, and the next tiers still run.
# Besides its wall time, a tier reports the CPU its process tree used (the processes pytest started and
# waited for: interpreters, JVMs, the process kubelet's pods; not the real node's containers, which are
# containerd's), and that as a share of the machine's cores over the tier: where a tier waits instead
# of computing, and so what running tiers side by side could gain.
tier() {
    local name=$1 path=$2 workers=$3 tier_started code=0 cpu_before wall cpu
    tier_started=$(date +%s)
    children_cpu
    read -r cpu_before <"$reports/cpu"
    echo "== pytest $name (-n $workers)" >&2
    SLUICE_TEST_TIMELINE="$reports/$name.timeline" \
        .venv/bin/pytest "$path" -p no:cacheprovider -n "$workers" --dist loadgroup --durations=30 \
        --junitxml="$reports/$name.xml" "${@:4}" || code=$?
    if [ "$code" -eq 5 ] && [ $# -gt 3 ]; then
        code=0  # the caller's own selection (-k, -m) left nothing of this tier to run
    fi
    if [ ! -s "$reports/$name.xml" ] && [ "$code" -ne 0 ] && [ "$code" -ne 5 ]; then
        # pytest ended before it wrote its report (a crash: 139 is a segmentation fault): the closing
        # total cannot count this tier's tests, so it says so.
        echo "the $name tier (pytest exit code $code, no report)" >>"$reports/unreported"
    fi
    wall=$(( $(date +%s) - tier_started ))
    children_cpu
    read -r cpu <"$reports/cpu"
    cpu=$(( cpu - cpu_before ))
    echo "test.sh: $name tier took ${wall}s (pytest exit code $code), CPU ${cpu}s:" \
        "$(( 100 * cpu / ( (wall > 0 ? wall : 1) * $(nproc) ) ))% of $(nproc) cores" >&2
    if [ -s "$reports/$name.timeline" ]; then
        echo "test.sh: $name tier's workers: $(.venv/bin/python scripts/_slowest.py --workers "$reports/$name.timeline")" >&2
    fi
    if [ "$status" -eq 0 ] && [ "$code" -ne 0 ]; then
        status=$code
    fi
}

# pytest-xdist workers per tier (SLUICE_TEST_UNIT_WORKERS, SLUICE_TEST_INTEGRATION_WORKERS,
# SLUICE_TEST_E2E_WORKERS; 0 is none), as measured on the 2-core machine (docs/testing.md). The unit
# tier took as long with -n 2 as without. The integration tier waits on checkpoints, timeouts and JVM
# starts (two workers kept the cores about half busy, each worker busy to the end): three workers took
# it from 574 s to 444 s. Tests that share a session service (the Spark JVM, the control plane, the
# Kafka broker) stay on one worker (tests/conftest.py). The e2e tier mostly waits (pods starting,
# checkpoints, grace periods), so its tests run side by side, each worker with its own control plane,
# process kubelet and operator (tests/e2e/README.md). As root the real node's tests run as a pytest run
# of their own beside it (real_node_tests, below), so the tier itself takes two workers; without root
# they stay in the tier (and fail, saying they need root), which then takes three.
# Lint, types and layer contracts run beside the unit tier: each keeps one core busy (mypy alone about
# 30 s from a fresh clone), and the unit tier, one process, leaves the other core to them. Their output
# comes after the unit tier's; a failure among them ends the run there, before the longer tiers.
lint() {
    echo "== ruff"
    .venv/bin/ruff check runtime operator tests bench examples
    echo "== mypy --strict"
    .venv/bin/mypy
    echo "== import-linter"
    .venv/bin/lint-imports
}
lint_started=$(date +%s)
lint >"$reports/lint.log" 2>&1 &
lint_job=$!
tier unit tests/unit "${SLUICE_TEST_UNIT_WORKERS:-0}" "$@"
lint_code=0
wait "$lint_job" || lint_code=$?
cat "$reports/lint.log"
echo "test.sh: lint, types and layer contracts took $(( $(date +%s) - lint_started ))s beside the unit tier" \
    "(exit code $lint_code)" >&2
if [ "$lint_code" -ne 0 ]; then
    exit "$lint_code"
fi
# real_node_tests: the real node's tests as a pytest run of their own, in the background beside the e2e
# tier. Within the tier's pytest-xdist run they were one group on one worker, the tier's tail, and
# pytest-xdist hands a worker more work once only two of its tests are left: another e2e test then ran
# after the last real-node test, on the tail (a 9th test on that worker in two runs of three).
real_node_tests() {
    local code=0
    SLUICE_TEST_TIMELINE="$reports/e2e-real-node.timeline" \
        .venv/bin/pytest tests/e2e/test_real_node*.py -p no:cacheprovider --durations=30 \
        --junitxml="$reports/e2e-real-node.xml" "$@" || code=$?
    if [ "$code" -eq 5 ] && [ $# -gt 0 ]; then
        code=0  # the caller's selection left none of them
    fi
    return "$code"
}
if ! $quick; then
    tier integration tests/integration "${SLUICE_TEST_INTEGRATION_WORKERS:-3}" "$@"
    if [ -n "$node_session" ]; then
        node_tests_started=$(date +%s)
        real_node_tests "$@" >"$reports/e2e-real-node.log" 2>&1 &
        node_tests=$!
        # Two workers for the other e2e tests: with the real node's run, three test processes.
        PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} --ignore-glob=*/e2e/test_real_node*" \
            tier e2e tests/e2e "${SLUICE_TEST_E2E_WORKERS:-2}" "$@"
        node_code=0
        wait "$node_tests" || node_code=$?
        echo "== pytest e2e, the real node's tests (beside the e2e tier)" >&2
        cat "$reports/e2e-real-node.log"
        echo "test.sh: the real node's tests took $(( $(date +%s) - node_tests_started ))s" \
            "(pytest exit code $node_code)" >&2
        if [ "$status" -eq 0 ] && [ "$node_code" -ne 0 ]; then
            status=$node_code
        fi
    else
        tier e2e tests/e2e "${SLUICE_TEST_E2E_WORKERS:-3}" "$@"
    fi
fi
stop_node_session

echo "== slowest 30 tests of the run (setup + call + teardown)" >&2
.venv/bin/python scripts/_slowest.py 30 "$reports"/*.xml >&2 || true
echo "test.sh: done in $(( $(date +%s) - started ))s" >&2
# The last line: every tier's tests counted together (pytest's own summary covers only its tier), and
# any tier that crashed before it could be counted.
total=$(.venv/bin/python scripts/_slowest.py --totals "$reports"/*.xml || true)
if [ -s "$reports/unreported" ]; then
    total="$total; not counted: $(paste -sd ';' "$reports/unreported")"
fi
echo "$total"
exit "$status"
