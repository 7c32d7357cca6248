#!/usr/bin/env bash
# Run the end-to-end tests against a throw-away kind cluster (needs Docker and kind on PATH).
#
#   tests/e2e/kind/run.sh [pytest arguments]
#
# What it sets up for the tests (tests/e2e/README.md says what differs from the process kubelet):
#   - a kind cluster (tests/e2e/kind/kind-config.yaml) whose kubeconfig goes to SLUICE_TEST_KUBECONFIG,
#     so that the kube_env fixture uses it instead of starting a control plane;
#   - the image sluice:dev, built from the repository's Dockerfile and loaded into the nodes: it is the
#     image examples/k8s/*.yaml name, unchanged, and the one the chart installs the operator from;
#   - a moto S3 server on this machine, listening on the kind network's gateway address, which both the
#     pods and this machine reach (SLUICE_TEST_S3_ENDPOINT).
#
# Environment: KIND_CLUSTER_NAME (sluice-e2e), KIND_NODE_IMAGE (kindest/node:<pinned version>),
# KEEP_CLUSTER=1 to keep the cluster (and the S3 server) afterwards.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
k8s_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$repo/hack/k8s-testenv/go.mod" | head -n1)
cluster=${KIND_CLUSTER_NAME:-sluice-e2e}
node_image=${KIND_NODE_IMAGE:-kindest/node:$k8s_version}
image=sluice:dev

for tool in docker kind; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool is not on PATH" >&2; exit 1; }
done
[[ -x "$repo/.venv/bin/python" ]] || { echo "run.sh: no $repo/.venv; run scripts/setup.sh first" >&2; exit 1; }

workdir=$(mktemp -d)
kubeconfig=$workdir/kubeconfig
s3_pid=
cleanup() {
    if [[ ${KEEP_CLUSTER:-} == 1 ]]; then
        echo "run.sh: keeping cluster $cluster (kubeconfig $kubeconfig) and S3 server pid ${s3_pid:-none}" >&2
        return
    fi
    [[ -z "$s3_pid" ]] || kill "$s3_pid" 2>/dev/null || true
    kind delete cluster --name "$cluster" >/dev/null 2>&1 || true
    rm -rf "$workdir"
}
trap cleanup EXIT

kind create cluster --name "$cluster" --image "$node_image" --config "$here/kind-config.yaml" \
    --kubeconfig "$kubeconfig" --wait 180s
docker build --tag "$image" --file "$repo/Dockerfile" "$repo"
kind load docker-image "$image" --name "$cluster"

# The kind network's IPv4 gateway is this machine as the nodes (and their pods) see it.
gateway=$(docker network inspect kind \
    --format '{{range .IPAM.Config}}{{println .Gateway}}{{end}}' | grep -E '^[0-9]+\.' | head -n1)
[[ -n "$gateway" ]] || { echo "run.sh: cannot find the IPv4 gateway of the docker network 'kind'" >&2; exit 1; }
s3_port=$("$repo/.venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
"$repo/.venv/bin/python" -m moto.server --host "$gateway" --port "$s3_port" >"$workdir/moto.log" 2>&1 &
s3_pid=$!
for _ in $(seq 50); do
    curl -fsS "http://$gateway:$s3_port/moto-api/" >/dev/null 2>&1 && break
    sleep 0.2
done
curl -fsS "http://$gateway:$s3_port/moto-api/" >/dev/null \
    || { echo "run.sh: the S3 server did not start:" >&2; cat "$workdir/moto.log" >&2; exit 1; }

cd "$repo"
SLUICE_TEST_KUBECONFIG=$kubeconfig SLUICE_TEST_S3_ENDPOINT=http://$gateway:$s3_port \
    .venv/bin/pytest -m kube tests/e2e "$@"
