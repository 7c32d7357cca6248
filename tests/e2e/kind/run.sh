#!/usr/bin/env bash
# Run the end-to-end tests against a throw-away kind cluster (needs Docker and kind on PATH).
#
#   tests/e2e/kind/run.sh [pytest arguments]
#
# Environment: KIND_CLUSTER_NAME (sluice-e2e), KIND_NODE_IMAGE (kindest/node:<pinned version>),
# SLUICE_TEST_IMAGE (sluice:e2e, built from SLUICE_DOCKERFILE=docker/Dockerfile and loaded into the
# nodes), KEEP_CLUSTER=1 to keep the cluster afterwards. The tests get the cluster through
# SLUICE_TEST_KUBECONFIG, which makes the kube_env fixture use it instead of starting a control plane.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$repo/hack/k8s-testenv/go.mod" | head -n1)
cluster=${KIND_CLUSTER_NAME:-sluice-e2e}
node_image=${KIND_NODE_IMAGE:-kindest/node:$k8s_version}
image=${SLUICE_TEST_IMAGE:-sluice:e2e}
dockerfile=${SLUICE_DOCKERFILE:-$repo/docker/Dockerfile}

for tool in docker kind; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is not on PATH" >&2; exit 1; }
done

workdir=$(mktemp -d)
kubeconfig=$workdir/kubeconfig
cleanup() {
    if [[ ${KEEP_CLUSTER:-} == 1 ]]; then
        echo "run.sh: keeping cluster $cluster; kubeconfig: $kubeconfig" >&2
    else
        kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
        rm -rf "$workdir"
    fi
}
trap cleanup EXIT

kind create cluster --name "$cluster" --image "$node_image" --config "$here/kind-config.yaml" \
    --kubeconfig "$kubeconfig" --wait 180s
docker build --tag "$image" --file "$dockerfile" "$repo"
kind load docker-image "$image" --name "$cluster"

cd "$repo"
SLUICE_TEST_KUBECONFIG=$kubeconfig SLUICE_TEST_IMAGE=$image \
    .venv/bin/pytest -m kube tests/e2e "$@"
