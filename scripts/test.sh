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
if [ -x scripts/k8s-binaries.sh ]; then
    SLUICE_K8S_BIN_DIR=$(scripts/k8s-binaries.sh)
    export SLUICE_K8S_BIN_DIR
fi

echo "== ruff" >&2
.venv/bin/ruff check runtime operator tests bench examples
echo "== mypy --strict" >&2
.venv/bin/mypy
echo "== import-linter" >&2
.venv/bin/lint-imports
echo "== pytest" >&2
.venv/bin/pytest tests "$@"
echo "test.sh: done in $(( $(date +%s) - started ))s" >&2
