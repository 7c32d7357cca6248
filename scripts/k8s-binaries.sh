#!/usr/bin/env bash
# Prints the directory that holds the Kubernetes test binaries:
#   etcd  kube-apiserver  kube-controller-manager  kubectl  helm
#
# Sources, in order:
#   1. $KUBEBUILDER_ASSETS (the envtest binaries of a developer laptop) for every binary it holds;
#      envtest ships no kube-controller-manager and no helm, so those come from PATH or from (2).
#   2. Built once from the pinned Go modules in hack/k8s-testenv/ into
#      ${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/k8s/<version>/bin, outside the checkout, and
#      reused afterwards by every clone on the machine. The build is keyed on the pins (go.mod/go.sum),
#      so changing a pin rebuilds.
#
# Go's module and build caches are the user's defaults (GOMODCACHE, GOCACHE; override them in the
# environment if you like): they are shared with every other checkout and worktree on the machine, so
# a second clone does not download and compile Kubernetes again.
#
# Progress goes to stderr; stdout carries only the directory, so callers can do
#   bin_dir=$(scripts/k8s-binaries.sh)
# With --check nothing is built: it exits with status 3 if a build would be needed (the test fixtures
# use this, because a cold build takes far longer than a test may).
set -euo pipefail

check_only=false
case ${1:-} in
    --check) check_only=true ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod_dir=$repo/hack/k8s-testenv
helm_mod_dir=$mod_dir/helm
binaries=(etcd kube-apiserver kube-controller-manager kubectl helm)

log() { printf 'k8s-binaries: %s\n' "$*" >&2; }

pinned_version() { # <go.mod> <module path>
    awk -v m="$2" '$1 == m { print $2 } $1 == "require" && $2 == m { print $3 }' "$1" | head -n1
}

k8s_version=$(pinned_version "$mod_dir/go.mod" k8s.io/kubernetes)
if [[ -z $k8s_version ]]; then
    log "cannot read the k8s.io/kubernetes pin from $mod_dir/go.mod"
    exit 1
fi
# Outside the checkout: a fresh clone (CI's, a second worktree) finds the binaries an earlier one built.
cache_root=${SLUICE_K8S_CACHE:-${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/k8s}
version_dir=$cache_root/$k8s_version
bin_dir=$version_dir/bin
helm_version=$(pinned_version "$helm_mod_dir/go.mod" helm.sh/helm/v4)
# The pins and this recipe (flags included) decide whether cached binaries are still valid.
pins_hash=$(cat "$mod_dir/go.mod" "$mod_dir/go.sum" "$helm_mod_dir/go.mod" "$helm_mod_dir/go.sum" \
    "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)

have_all() { # <dir>
    local b
    for b in "${binaries[@]}"; do [[ -x $1/$b ]] || return 1; done
}

build_pinned() {
    if $check_only; then
        log "Kubernetes $k8s_version binaries are not built in $bin_dir (or their pins changed)"
        exit 3
    fi
    mkdir -p "$version_dir"
    # Several test sessions may start at once; only one of them builds, the others wait and reuse.
    exec 9>"$version_dir/.lock"
    flock 9
    if [[ -f $version_dir/.pins && $(cat "$version_dir/.pins") == "$pins_hash" ]] && have_all "$bin_dir"; then
        return 0
    fi
    local staging
    staging=$(mktemp -d "$version_dir/.bin.XXXXXX")
    # Static, path-independent, stripped binaries, as the upstream release builds them.
    export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
    # Without the version stamp the binaries call themselves v0.0.0-master, which breaks clients
    # that check the server version (helm's kubeVersion constraints, kubectl's skew warning).
    local minor=${k8s_version#v1.}
    minor=${minor%%.*}
    local k8s_ldflags="-s -w" pkg
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
        k8s_ldflags+=" -X $pkg.gitTreeState=clean"
    done
    local start=$SECONDS
    log "building Kubernetes $k8s_version binaries into $bin_dir (first run only; ~30-60 min on 2 cores)"
    (
        cd "$mod_dir"
        go build -ldflags "$k8s_ldflags" -o "$staging/" k8s.io/kubernetes/cmd/kubectl
        # etcd's main package is the module root go.etcd.io/etcd/server/v3, which go would name "server".
        go build -ldflags "-s -w" -o "$staging/etcd" go.etcd.io/etcd/server/v3
        go build -ldflags "$k8s_ldflags" -o "$staging/" k8s.io/kubernetes/cmd/kube-controller-manager
        go build -ldflags "$k8s_ldflags" -o "$staging/" k8s.io/kubernetes/cmd/kube-apiserver
    )
    (cd "$helm_mod_dir" &&
        go build -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" \
            -o "$staging/helm" helm.sh/helm/v4/cmd/helm)
    chmod 755 "$staging"
    rm -rf "$bin_dir"
    mv "$staging" "$bin_dir"
    echo "$pins_hash" >"$version_dir/.pins"
    log "built in $((SECONDS - start)) s"
}

if [[ -n ${KUBEBUILDER_ASSETS:-} ]]; then
    if [[ ! -x $KUBEBUILDER_ASSETS/kube-apiserver || ! -x $KUBEBUILDER_ASSETS/etcd ]]; then
        log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS holds no etcd and kube-apiserver;" \
            "point it at an envtest asset directory (setup-envtest use -p path) or unset it"
        exit 1
    fi
    # One directory of links, so callers see a single bin dir whatever the sources are.
    assets_key=$(printf '%s' "$KUBEBUILDER_ASSETS" | sha256sum | cut -c1-16)
    link_dir=$cache_root/assets-$assets_key/bin
    mkdir -p "$link_dir"
    missing=()
    for b in "${binaries[@]}"; do
        if [[ -x $KUBEBUILDER_ASSETS/$b ]]; then
            ln -sfn "$KUBEBUILDER_ASSETS/$b" "$link_dir/$b"
        elif command -v "$b" >/dev/null; then
            ln -sfn "$(command -v "$b")" "$link_dir/$b"
        else
            missing+=("$b")
        fi
    done
    if ((${#missing[@]})); then
        log "not in KUBEBUILDER_ASSETS nor on PATH: ${missing[*]}; building the pinned ones"
        build_pinned
        for b in "${missing[@]}"; do ln -sfn "$bin_dir/$b" "$link_dir/$b"; done
    fi
    echo "$link_dir"
    exit 0
fi

if ! [[ -f $version_dir/.pins && $(cat "$version_dir/.pins") == "$pins_hash" ]] || ! have_all "$bin_dir"; then
    if ! command -v go >/dev/null; then
        log "no Go toolchain on PATH: install Go >= 1.26 or set KUBEBUILDER_ASSETS to envtest binaries"
        exit 1
    fi
    build_pinned
fi
echo "$bin_dir"
