#!/usr/bin/env bash
# A real one-node Kubernetes cluster on this machine, for the end-to-end tests and for trying Sluice:
#
#   scripts/k8s-cluster.sh up        start it (builds or reuses the pinned binaries); prints the kubeconfig
#   scripts/k8s-cluster.sh down      stop it and remove every trace: processes, mounts, network namespace
#   scripts/k8s-cluster.sh status    exit 0 if it runs
#   scripts/k8s-cluster.sh load ARCHIVE...   import image archives (docker-archive or OCI tars)
#   scripts/k8s-cluster.sh netns     print the name of the node's network namespace
#   scripts/k8s-cluster.sh restart COMPONENT...   stop components (SIGTERM, as a service manager does)
#                                    and start them again with the same settings, e.g. kubelet
#
# What runs: etcd, kube-apiserver (Pod Security admission on, as by default), kube-controller-manager,
# kube-scheduler, containerd with runc, a kubelet, the CNI plugins bridge/host-local/portmap/loopback,
# kube-proxy, CoreDNS and kube-router's NetworkPolicy firewall, all as processes of this machine (root),
# each under scripts/lib/supervise.sh, which starts it again when it exits (systemd's Restart=always).
#
# Isolation: every one of them runs inside a network namespace of its own, $SLUICE_CLUSTER_NETNS
# (default sluice-node), so their ports, iptables rules, bridge and pods live there, not in this
# machine's network. A veth pair joins it to this machine: 10.250.0.1 here, 10.250.0.2 the node, the
# API server's address (https://10.250.0.2:6443). The namespace has no default route, so neither the
# node nor its pods (10.244.0.0/24 on the bridge cni0; Services 10.96.0.0/24) can send anywhere but to
# this machine's 10.250.0.1 and to each other. CoreDNS (10.96.0.10) answers the cluster's names only:
# it has no plugin that forwards a query (hack/k8s-node/coredns).
#
# Images: none is pulled. The pod sandbox image is made here from a static binary, and
# `load ARCHIVE` imports others (scripts/build-image.sh --archive writes the Sluice image's).
#
# State: $SLUICE_CLUSTER_DIR (default /var/lib/sluice-cluster): certificates, kubeconfig (admin),
# logs/, etcd's data, containerd's and the kubelet's directories. `down` removes it.
# Needs root, the Debian packages of scripts/install-system-deps.sh and the binaries of
# scripts/k8s-binaries.sh and scripts/k8s-node-binaries.sh (built on first use, cached).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${SLUICE_CLUSTER_DIR:-/var/lib/sluice-cluster}
netns=${SLUICE_CLUSTER_NETNS:-sluice-node}
run_dir=/run/$netns
node_name=$netns
host_ip=10.250.0.1
node_ip=10.250.0.2
link_prefix=30
host_link=${netns:0:11}-h
node_link=uplink
pod_cidr=10.244.0.0/24
cluster_cidr=10.244.0.0/16
service_cidr=10.96.0.0/24
api_service_ip=10.96.0.1
dns_ip=10.96.0.10
api_url=https://$node_ip:6443
# Pods' cgroups go below this one in every hierarchy, apart from anything else on the machine.
cgroup_root=$netns
components=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy coredns
    kube-router)

log() { printf 'k8s-cluster: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
in_node() { nsenter --net="/run/netns/$netns" -- "$@"; }

need_root() {
    [[ $(id -u) -eq 0 ]] || die "needs root: it creates a network namespace, mounts and cgroups"
}

# --- binaries ------------------------------------------------------------------------------------------

find_binaries() {
    cp_bin=$("$repo/scripts/k8s-binaries.sh")
    node_bin=$("$repo/scripts/k8s-node-binaries.sh")
    local tool
    for tool in containerd containerd-shim-runc-v2 runc ctr iptables ip nsenter openssl ipset; do
        command -v "$tool" >/dev/null \
            || die "$tool is missing: run scripts/install-system-deps.sh (as root)"
    done
    [[ -x /usr/lib/cni/bridge ]] || die "the CNI plugins are missing: run scripts/install-system-deps.sh"
}

# --- certificates --------------------------------------------------------------------------------------

# cert NAME SUBJECT EXTENSIONS: a key and a certificate signed by the cluster's CA.
cert() {
    local name=$1 subject=$2 extensions=$3 pki=$state/pki
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$subject" \
        -keyout "$pki/$name.key" -out "$pki/$name.csr" 2>/dev/null
    printf '%s\n' "$extensions" >"$pki/$name.ext"
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 365 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
    rm -f "$pki/$name.csr" "$pki/$name.ext"
}

make_pki() {
    local pki=$state/pki client='extendedKeyUsage=clientAuth'
    [[ -f $pki/ca.crt ]] && return 0
    mkdir -p "$pki"
    chmod 700 "$pki"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
        -subj "/CN=sluice-cluster-ca" -keyout "$pki/ca.key" -out "$pki/ca.crt" \
        -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign' 2>/dev/null
    cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:$node_ip,IP:$api_service_ip,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    cert kubelet-serving "/CN=$node_name" "extendedKeyUsage=serverAuth
subjectAltName=IP:$node_ip,DNS:$node_name"
    cert admin "/O=system:masters/CN=sluice-cluster-admin" "$client"
    cert apiserver-kubelet-client "/O=sluice:apiserver/CN=kube-apiserver-kubelet-client" "$client"
    cert controller-manager "/CN=system:kube-controller-manager" "$client"
    cert scheduler "/CN=system:kube-scheduler" "$client"
    cert kubelet "/O=system:nodes/CN=system:node:$node_name" "$client"
    cert kube-proxy "/CN=system:kube-proxy" "$client"
    cert coredns "/CN=sluice:coredns" "$client"
    cert kube-router "/CN=sluice:kube-router" "$client"
    openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
    openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

kubeconfig() { # NAME: a kubeconfig that authenticates with pki/NAME.{crt,key}
    local name=$1
    write_config "$state/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sluice
  cluster: {server: "$api_url", certificate-authority: "$state/pki/ca.crt"}
users:
- name: $name
  user: {client-certificate: "$state/pki/$name.crt", client-key: "$state/pki/$name.key"}
contexts:
- name: sluice
  context: {cluster: sluice, user: $name}
current-context: sluice
EOF
    chmod 600 "$state/$name.kubeconfig"
}

# --- network -------------------------------------------------------------------------------------------

make_network() {
    if [[ ! -e /run/netns/$netns ]]; then
        ip netns add "$netns"
    fi
    if ! ip link show "$host_link" >/dev/null 2>&1; then
        ip link add "$host_link" type veth peer name "$node_link" netns "$netns"
        ip addr add "$host_ip/$link_prefix" dev "$host_link"
        ip link set "$host_link" up
    fi
    in_node ip link set lo up
    in_node ip addr replace "$node_ip/$link_prefix" dev "$node_link"
    in_node ip link set "$node_link" up
    # Pods reach Services and each other through the node; bridged traffic passes iptables, so that
    # kube-proxy's DNAT and the NetworkPolicy firewall see pod-to-pod packets on the same bridge.
    in_node sysctl -q -w net.ipv4.ip_forward=1
    in_node sysctl -q -w net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
    mkdir -p "$state/cni/net.d" "$state/cni/ipam"
    write_config "$state/cni/net.d/10-sluice.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "sluice",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": {
        "type": "host-local", "dataDir": "$state/cni/ipam",
        "ranges": [[{"subnet": "$pod_cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

# --- processes -----------------------------------------------------------------------------------------

write_config() { # FILE: writes standard input to FILE only if that changes it
    # `up` runs again on every `restart`, and kube-proxy exits when its configuration file is written
    # (it watches it): rewriting unchanged files left the node without kube-proxy after any restart,
    # so Services made or moved afterwards got no rules and their addresses were unreachable from pods.
    cat >"$1.new"
    if cmp -s "$1.new" "$1"; then
        rm -f "$1.new"
    else
        mv "$1.new" "$1"
    fi
}

start() { # NAME COMMAND...: runs COMMAND in the node's network namespace, detached, logging to logs/NAME.log
    local name=$1
    shift
    if running "$name"; then
        return 0
    fi
    # Under a supervisor that starts it again when it exits, as a node's service manager would
    # (scripts/lib/supervise.sh); pids/NAME is the supervisor's, pids/NAME.child the component's.
    # Not holding the lock of `up` (fd 9): a daemon would keep it for its whole life.
    setsid nsenter --net="/run/netns/$netns" -- "$repo/scripts/lib/supervise.sh" "$name" \
        "$state/pids/$name.child" "$@" >>"$state/logs/$name.log" 2>&1 </dev/null 9>&- &
    echo $! >"$state/pids/$name"
}

running() {
    local pid
    [[ -f $state/pids/$1 ]] && pid=$(cat "$state/pids/$1") && kill -0 "$pid" 2>/dev/null
}

wait_for() { # WHAT SECONDS COMMAND...
    local what=$1 seconds=$2 deadline
    shift 2
    deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            log "$what did not come up in ${seconds}s; its log:"
            tail -n 30 "$state/logs/$what.log" >&2 2>/dev/null || true
            exit 1
        fi
        sleep 0.5
    done
}

kubectl_admin() { "$cp_bin/kubectl" --kubeconfig "$state/admin.kubeconfig" "$@"; }

start_control_plane() {
    local pki=$state/pki
    start etcd "$cp_bin/etcd" --data-dir "$state/etcd" --name "$node_name" \
        --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
        --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
        --initial-cluster "$node_name=http://127.0.0.1:2380" --listen-metrics-urls http://127.0.0.1:2381 \
        --quota-backend-bytes 1073741824
    wait_for etcd 30 in_node curl -fsS http://127.0.0.1:2379/health
    start kube-apiserver "$cp_bin/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
        --bind-address "$node_ip" --advertise-address "$node_ip" --secure-port 6443 \
        --service-cluster-ip-range "$service_cidr" \
        --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
        --client-ca-file "$pki/ca.crt" \
        --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
        --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
        --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP \
        --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
        --profiling=false --allow-privileged=false
    wait_for kube-apiserver 120 curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
        "$api_url/readyz"
    start kube-controller-manager "$cp_bin/kube-controller-manager" \
        --kubeconfig "$state/controller-manager.kubeconfig" \
        --authentication-kubeconfig "$state/controller-manager.kubeconfig" \
        --authorization-kubeconfig "$state/controller-manager.kubeconfig" \
        --bind-address 127.0.0.1 --use-service-account-credentials \
        --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
        --allocate-node-cidrs --cluster-cidr "$cluster_cidr" --node-cidr-mask-size 24 \
        --service-cluster-ip-range "$service_cidr" --leader-elect=false --profiling=false
    start kube-scheduler "$node_bin/kube-scheduler" --kubeconfig "$state/scheduler.kubeconfig" \
        --authentication-kubeconfig "$state/scheduler.kubeconfig" \
        --authorization-kubeconfig "$state/scheduler.kubeconfig" \
        --bind-address 127.0.0.1 --leader-elect=false --profiling=false
    # Who may do what among the node's own processes: the API server's calls to kubelets, CoreDNS's and
    # kube-router's reads of the cluster.
    kubectl_admin apply -f - >/dev/null <<'EOF'
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "sluice:apiserver-kubelet-client"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:kubelet-api-admin"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: kube-apiserver-kubelet-client}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "sluice:cluster-reader"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces, nodes]
  verbs: [list, watch, get]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch, get]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch, get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "sluice:cluster-readers"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "sluice:cluster-reader"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "sluice:coredns"}
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "sluice:kube-router"}
EOF
}

pause_image=localhost/sluice-pause:1

# The pod sandbox image: the static pause binary as the only file of a one-layer image, written as a
# docker-archive tar by hand (no builder needed): a layer tar, its config and the manifest.
pause_archive() {
    local out=$state/pause.tar work
    [[ -s $out ]] && return 0
    work=$(mktemp -d "$state/.pause.XXXXXX")
    mkdir -p "$work/rootfs"
    cp "$node_bin/pause" "$work/rootfs/pause"
    tar --numeric-owner --owner=0 --group=0 -C "$work/rootfs" -cf "$work/layer.tar" pause
    local diff_id config_id
    diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
    cat >"$work/config.json" <<EOF
{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:$diff_id"]}}
EOF
    config_id=$(sha256sum "$work/config.json" | cut -d' ' -f1)
    mv "$work/config.json" "$work/$config_id.json"
    cat >"$work/manifest.json" <<EOF
[{"Config":"$config_id.json","RepoTags":["$pause_image"],"Layers":["layer.tar"]}]
EOF
    tar -C "$work" -cf "$out.tmp" manifest.json "$config_id.json" layer.tar
    mv "$out.tmp" "$out"
    rm -rf "$work"
}

ctr_node() { ctr --address "$run_dir/containerd.sock" --namespace k8s.io "$@"; }

start_node() {
    mkdir -p "$run_dir" "$state/containerd" "$state/kubelet"
    write_config "$state/containerd.toml" <<EOF
version = 2
root = "$state/containerd"
state = "$run_dir/containerd"
[grpc]
  address = "$run_dir/containerd.sock"
[ttrpc]
  address = "$run_dir/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # Where this runs without CAP_SYS_RESOURCE (inside a container, say), a negative oom_score_adj, as
  # the kubelet asks for sandboxes and critical pods, fails runc; keep scores at or above containerd's.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
EOF
    start containerd containerd --config "$state/containerd.toml"
    wait_for containerd 30 ctr_node version
    pause_archive
    ctr_node images import --no-unpack "$state/pause.tar" >/dev/null

    write_config "$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups are v1; the kubelet refuses them unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup_root
containerRuntimeEndpoint: unix://$run_dir/containerd.sock
address: $node_ip
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $state/pki/kubelet-serving.crt
tlsPrivateKeyFile: $state/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$dns_ip]
# Pods get the cluster's DNS and nothing of this machine's resolv.conf.
resolvConf: ""
failSwapOn: false
# The suite's images are imported, never pulled: keep them whatever the disk's use.
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
maxPods: 60
serializeImagePulls: false
EOF
    local hierarchy
    for hierarchy in /sys/fs/cgroup/*/; do
        [[ -f $hierarchy/cgroup.procs ]] && mkdir -p "$hierarchy$cgroup_root"
    done
    # A new cpuset cgroup has no CPUs and no memory nodes until given its parent's.
    local cpuset=/sys/fs/cgroup/cpuset
    if [[ -f $cpuset/$cgroup_root/cpuset.cpus && -z $(cat "$cpuset/$cgroup_root/cpuset.cpus") ]]; then
        cat "$cpuset/cpuset.cpus" >"$cpuset/$cgroup_root/cpuset.cpus"
        cat "$cpuset/cpuset.mems" >"$cpuset/$cgroup_root/cpuset.mems"
    fi
    start kubelet "$node_bin/kubelet" --config "$state/kubelet.yaml" \
        --kubeconfig "$state/kubelet.kubeconfig" --hostname-override "$node_name" --node-ip "$node_ip" \
        --root-dir "$state/kubelet" --cert-dir "$state/pki"

    write_config "$state/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$state/kube-proxy.kubeconfig"}
hostnameOverride: $node_name
mode: iptables
clusterCIDR: $cluster_cidr
bindAddress: $node_ip
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# nf_conntrack_max is a setting of the whole machine, not of the node's network namespace: leave it.
conntrack: {maxPerCore: 0}
EOF
    start kube-proxy "$node_bin/kube-proxy" --config "$state/kube-proxy.yaml"

    # CoreDNS runs on the node (as a DaemonSet with hostNetwork would) behind the kube-dns Service; it
    # listens on every address of the node's network namespace, which holds nothing but the cluster.
    write_config "$state/Corefile" <<EOF
.:53 {
    errors
    health 127.0.0.1:8080
    ready 127.0.0.1:8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $state/coredns.kubeconfig sluice
        pods insecure
    }
    cache 30
}
EOF
    start coredns "$node_bin/coredns" -conf "$state/Corefile"
    kubectl_admin apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: $dns_ip
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-node
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: sluice-cluster}
addressType: IPv4
endpoints:
- addresses: ["$node_ip"]
  conditions: {ready: true}
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
EOF

}

# The NetworkPolicy firewall looks its node up when it starts: after the node has registered.
start_firewall() {
    start kube-router "$node_bin/kube-router" --kubeconfig "$state/kube-router.kubeconfig" \
        --hostname-override "$node_name" --run-firewall=true --run-router=false \
        --run-service-proxy=false --metrics-port 0 --health-port 20244
}

wait_node_ready() {
    local deadline=$((SECONDS + 180))
    until [[ $(kubectl_admin get node "$node_name" \
        -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; do
        if ((SECONDS >= deadline)); then
            log "the node did not become Ready in 180s; the kubelet's log:"
            tail -n 40 "$state/logs/kubelet.log" >&2
            exit 1
        fi
        sleep 1
    done
}

up() {
    need_root
    find_binaries
    mkdir -p "$state/logs" "$state/pids"
    chmod 700 "$state"
    exec 9>"$state/up.lock"
    flock 9
    local started=$SECONDS
    make_pki
    local name
    for name in admin controller-manager scheduler kubelet kube-proxy coredns kube-router; do
        kubeconfig "$name"
    done
    make_network
    start_control_plane
    start_node
    wait_node_ready
    start_firewall
    echo "cluster up time: $((SECONDS - started)) s" >&2
    echo "$state/admin.kubeconfig"
}

# --- down ----------------------------------------------------------------------------------------------

stop_component() { # NAME: SIGTERM, and SIGKILL if it is still there 10 s later
    local name=$1 pid child
    [[ -f $state/pids/$name ]] || return 0
    pid=$(cat "$state/pids/$name")
    # The supervisor passes SIGTERM on to the component, waits for it and exits without a new start.
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    child=$(cat "$state/pids/$name.child" 2>/dev/null || true)
    kill -9 "$pid" ${child:+"$child"} 2>/dev/null || true
    rm -f "$state/pids/$name" "$state/pids/$name.child"
}

stop_all() {
    local i
    # The node first, so that nothing restarts containers while the runtime goes.
    for ((i = ${#components[@]} - 1; i >= 0; i--)); do
        stop_component "${components[i]}"
    done
    # Containers outlive containerd (their shims are their parents): end them by their cgroups.
    local cgroup
    for cgroup in /sys/fs/cgroup/*/"$cgroup_root"; do
        [[ -d $cgroup ]] || continue
        find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    done
    pkill_shims
}

# The runc shims of this cluster's containerd (found by its socket in their command line, never by name).
pkill_shims() {
    local pid
    for pid in $(pgrep -f -- "-address $run_dir/containerd.sock" || true); do
        kill -9 "$pid" 2>/dev/null || true
    done
}

remove_cgroups() {
    local cgroup
    for cgroup in /sys/fs/cgroup/*/"$cgroup_root"; do
        [[ -d $cgroup ]] || continue
        find "$cgroup" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
}

unmount_under() { # DIR: every mount under DIR, deepest first
    local target
    while read -r target; do
        umount -l "$target" 2>/dev/null || true
    done < <(awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
}

# The pods' network namespaces (/run/netns/cni-*, where containerd 1.6 puts them whatever
# netns_mounts_under says), as the runtime's containers name them in their specs: only this cluster's,
# read while its containerd still answers.
pod_netns_paths() {
    [[ -S $run_dir/containerd.sock ]] || return 0
    local id
    for id in $(ctr_node containers ls -q 2>/dev/null); do
        # An application container joins its sandbox's namespace through /proc, and names no path here.
        ctr_node containers info "$id" 2>/dev/null | grep -o '"path": "/[^"]*netns/cni-[^"]*"' | cut -d'"' -f4 \
            || true
    done | sort -u
}

down() {
    need_root
    [[ -d $state || -e /run/netns/$netns ]] || return 0
    local pod_netns
    pod_netns=$(pod_netns_paths)
    stop_all
    local path
    for path in $pod_netns; do
        umount "$path" 2>/dev/null || true
        rm -f "$path"
    done
    unmount_under "$state"
    unmount_under "$run_dir"
    ip link delete "$host_link" 2>/dev/null || true
    ip netns delete "$netns" 2>/dev/null || true
    remove_cgroups
    rm -rf "$state" "$run_dir"
    log "down"
}

case ${1:-} in
    up) up ;;
    down) down ;;
    status) running kube-apiserver && running kubelet ;;
    load)
        shift
        need_root
        (($#)) || die "load: give image archives"
        mkdir -p "$state/loaded"
        for archive in "$@"; do
            # Archives of scripts/build-image.sh are named by their content: one is imported once.
            stamp=$state/loaded/$(basename "$archive").$(stat -c %s-%Y "$archive")
            [[ -e $stamp ]] && continue
            ctr_node images import "$archive" >/dev/null
            touch "$stamp"
        done
        ;;
    netns) echo "$netns" ;;
    restart)
        # What a service manager's restart does to one component: the rest of the cluster, and the
        # containers (children of their shims, not of containerd or the kubelet), keep running.
        shift
        need_root
        (($#)) || die "restart: name components: ${components[*]}"
        running kube-apiserver || die "restart: the cluster is not up"
        for name in "$@"; do
            [[ " ${components[*]} " == *" $name "* ]] || die "restart: $name is none of: ${components[*]}"
        done
        for name in "$@"; do
            stop_component "$name"
        done
        up >/dev/null
        ;;
    *) sed -n '2,10s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
