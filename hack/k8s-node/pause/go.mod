// The pod sandbox process of the real one-node test cluster (scripts/k8s-node-binaries.sh).
module sluice.dev/hack/k8s-node/pause

go 1.26.0
