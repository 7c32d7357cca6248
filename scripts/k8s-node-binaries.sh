#!/usr/bin/env bash
# Prints the directory that holds the node binaries of the real one-node test cluster
# (scripts/k8s-cluster.sh):
#   kubelet  kube-proxy  kube-scheduler  coredns  kube-router  pause
#
# kubelet, kube-proxy and kube-scheduler come from the k8s.io/kubernetes release pinned in
# hack/k8s-testenv/go.mod (hack/k8s-node/go.mod must pin the same one: the script checks), CoreDNS
# from hack/k8s-node/coredns (only the plugins that answer cluster names; no "forward"), the
# NetworkPolicy enforcer from hack/k8s-node/netpol, the pod sandbox process from hack/k8s-node/pause. The control-plane binaries (etcd, kube-apiserver,
# kube-controller-manager, kubectl, helm) stay with scripts/k8s-binaries.sh; these live in a module of
# their own so that their pins do not invalidate those.
#
# Built once into ${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/k8s-node/<key>/bin, outside
# the clone, so that every clone and worktree on the machine reuses them; <key> is a hash of the pins
# and of this script. Go's module and build caches are the user's defaults.
#
# Progress goes to stderr; stdout carries only the directory. With --check nothing is built: it exits
# with status 3 if a build would be needed.
set -euo pipefail

check_only=false
case ${1:-} in
    --check) check_only=true ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
node_mod=$repo/hack/k8s-node
binaries=(kubelet kube-proxy kube-scheduler coredns kube-router pause)

log() { printf 'k8s-node-binaries: %s\n' "$*" >&2; }

pinned_version() { # <go.mod> <module path>
    awk -v m="$2" '$1 == m { print $2 } $1 == "require" && $2 == m { print $3 }' "$1" | head -n1
}

k8s_version=$(pinned_version "$node_mod/go.mod" k8s.io/kubernetes)
control_plane_version=$(pinned_version "$repo/hack/k8s-testenv/go.mod" k8s.io/kubernetes)
if [[ -z $k8s_version || $k8s_version != "$control_plane_version" ]]; then
    log "hack/k8s-node/go.mod pins k8s.io/kubernetes ${k8s_version:-nothing}, hack/k8s-testenv/go.mod" \
        "pins ${control_plane_version:-nothing}: a node must run the control plane's release; make them equal"
    exit 1
fi

key=$(cat "$node_mod/go.mod" "$node_mod/go.sum" "$node_mod/coredns/go.mod" "$node_mod/coredns/go.sum" \
    "$node_mod/coredns/main.go" "$node_mod/netpol/go.mod" "$node_mod/netpol/go.sum" "$node_mod/pause/go.mod" \
    "$node_mod/pause/main.go" "${BASH_SOURCE[0]}" \
    | sha256sum | cut -c1-16)
cache_root=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/k8s-node
version_dir=$cache_root/$k8s_version-$key
bin_dir=$version_dir/bin

have_all() {
    local b
    for b in "${binaries[@]}"; do [[ -x $bin_dir/$b ]] || return 1; done
}

if have_all; then
    echo "$bin_dir"
    exit 0
fi
if $check_only; then
    log "the node binaries are not built in $bin_dir (or their pins changed)"
    exit 3
fi
if ! command -v go >/dev/null; then
    log "no Go toolchain on PATH: install Go >= 1.26"
    exit 1
fi

mkdir -p "$version_dir"
# Several sessions may start at once; only one of them builds, the others wait and reuse.
exec 9>"$version_dir/.lock"
flock 9
if have_all; then
    echo "$bin_dir"
    exit 0
fi
staging=$(mktemp -d "$version_dir/.bin.XXXXXX")
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
minor=${k8s_version#v1.}
minor=${minor%%.*}
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    k8s_ldflags+=" -X $pkg.gitTreeState=clean"
done
start=$SECONDS
log "building the node binaries into $bin_dir (first run only; ~15-30 min on 2 cores)"
(
    cd "$node_mod"
    go build -ldflags "$k8s_ldflags" -o "$staging/" \
        k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
)
(cd "$node_mod/coredns" && go build -ldflags "-s -w" -o "$staging/coredns" .)
(cd "$node_mod/netpol" && go build -ldflags "-s -w" -o "$staging/" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router)
(cd "$node_mod/pause" && go build -ldflags "-s -w" -o "$staging/pause" .)
chmod 755 "$staging"
rm -rf "$bin_dir"
mv "$staging" "$bin_dir"
log "built in $((SECONDS - start)) s"
echo "$bin_dir"
