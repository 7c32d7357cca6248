#!/usr/bin/env bash
# Installs the Debian packages the test suite needs and that pip cannot provide:
#   - PostgreSQL server binaries (initdb, pg_ctl, postgres) for the two-phase-commit sink tests,
#     started by tests/testkit/postgres.py in a temporary directory (no system cluster is used);
#   - a Java 17+ JDK: the runtime for PySpark, and javac for the runtime's Spark-on-Kubernetes feature step
#     (scripts/build-jvm.sh);
#   - Maven, which fetches the Kafka broker's jars from Maven Central once (scripts/kafka-jars.sh);
#   - Chromium, the browser the dashboard tests drive headless through Playwright (browsers cannot be
#     downloaded by Playwright itself here; the tests point it at /usr/bin/chromium);
#   - what builds the image and runs the real one-node cluster of the e2e tests (scripts/build-image.sh,
#     scripts/k8s-cluster.sh): mmdebstrap (the image's base from Debian packages), buildah (the image
#     from the Dockerfile), containerd and runc, the CNI plugins, iptables and ipset (kube-proxy and the
#     NetworkPolicy firewall), conntrack.
#
# Idempotent and quick when warm: each package is installed only when what it provides is missing, and
# apt is not touched at all (no `apt-get update`) when nothing is missing. Non-interactive.
# Needs root for the install step (or sudo); prints what to do otherwise.
set -euo pipefail

log() { printf 'install-system-deps: %s\n' "$*" >&2; }

missing=()

if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null && ! command -v initdb >/dev/null; then
    missing+=(postgresql)
fi

java_major() {
    # `java -version` prints e.g. 'openjdk version "17.0.15" 2025-04-15' (or "1.8.0_..." for Java 8).
    java -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == "1") ? v[2] : v[1]; exit }'
}
javac_major() {
    # `javac -version` prints e.g. 'javac 17.0.15'.
    javac -version 2>&1 | awk '/^javac/ { split($2, v, "."); print v[1]; exit }'
}
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ] \
    || ! command -v javac >/dev/null || [ "$(javac_major)" -lt 17 ]; then
    missing+=(openjdk-17-jdk-headless)
fi

if ! command -v mvn >/dev/null; then
    missing+=(maven)
fi

if ! command -v chromium >/dev/null; then
    missing+=(chromium)
fi

# command → Debian package, for the image builder and the one-node cluster.
for pair in mmdebstrap:mmdebstrap buildah:buildah containerd:containerd runc:runc iptables:iptables \
    ipset:ipset conntrack:conntrack; do
    if ! command -v "${pair%%:*}" >/dev/null; then
        missing+=("${pair#*:}")
    fi
done
if [ ! -x /usr/lib/cni/bridge ]; then
    missing+=(containernetworking-plugins)
fi

if [ ${#missing[@]} -eq 0 ]; then
    log "nothing to install (PostgreSQL, a Java 17+ JDK, Maven, Chromium and the cluster's tools present)"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null; then
    as_root=(sudo)
else
    log "missing ${missing[*]}: run this script as root (or install sudo)"
    exit 1
fi

if ! command -v apt-get >/dev/null; then
    log "missing ${missing[*]} and this is not a Debian-like system: install them with your package manager"
    exit 1
fi

# The Debian package would create and start a system cluster "main" on port 5432; the tests never use
# it. Writing this file first prevents that (UCF_FORCE_CONFFOLD below keeps it when the package installs).
if [[ " ${missing[*]} " == *" postgresql "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    "${as_root[@]}" mkdir -p /etc/postgresql-common
    echo 'create_main_cluster = false' | "${as_root[@]}" tee /etc/postgresql-common/createcluster.conf >/dev/null
fi

log "installing ${missing[*]}"
apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1 apt-get -o Dpkg::Use-Pty=0)
"${apt[@]}" update -qq
"${apt[@]}" install -y -qq --no-install-recommends -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null
log "installed ${missing[*]}"
