#!/usr/bin/env bash
# Sets everything up on a fresh machine and runs the whole test suite:
#   system packages (PostgreSQL, Java), the locked Python environment, the Kubernetes test binaries
#   (built once from the Go module proxy and cached under .cache/), then lint, types, layer contracts,
#   and the unit, integration and end-to-end tests. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)

scripts/install-system-deps.sh
scripts/setup.sh
# Builds the Kubernetes test binaries once (minutes, cold) or finds them (instant, warm); the test
# fixtures only look them up.
scripts/k8s-binaries.sh >/dev/null
scripts/kafka-jars.sh >/dev/null  # the Kafka 4 test broker's jars, from Maven Central once

echo "== ruff" >&2
.venv/bin/ruff check runtime operator tests bench examples
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== import-linter" >&2
.venv/bin/lint-imports
echo "== pytest" >&2
.venv/bin/pytest tests "$@"
echo "test.sh: done in $(( $(date +%s) - started ))s" >&2
