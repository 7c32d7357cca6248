#!/usr/bin/env bash
# Runs a command, and runs it again whenever it exits, as a service manager does (systemd's
# Restart=always): scripts/k8s-cluster.sh runs every cluster component under it. Without it a component
# that gave up at start-up stayed gone: kube-controller-manager exits when etcd times out a request while
# it builds its controllers (as it did on a loaded machine), and then no Deployment ever got a pod.
#
#   supervise.sh NAME CHILD_PID_FILE COMMAND...
#
# The command's pid is written to CHILD_PID_FILE each time it starts. SIGTERM (or SIGINT) goes to the
# command, which is waited for; then supervise.sh exits without starting it again. Between starts it
# waits 1 s, doubling up to 10 s while the command keeps exiting within a minute of its start.
set -uo pipefail

name=$1 child_file=$2
shift 2
child=

stop() {
    if [[ -n $child ]]; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    rm -f "$child_file"
    exit 0
}
trap stop TERM INT

delay=1
while :; do
    started=$SECONDS
    "$@" &
    child=$!
    echo "$child" >"$child_file"
    wait "$child"
    code=$?
    child=
    if ((SECONDS - started >= 60)); then
        delay=1
    fi
    echo "supervise: $name exited with status $code; starting it again in ${delay}s" >&2
    sleep "$delay" &
    wait $!
    delay=$((delay * 2 > 10 ? 10 : delay * 2))
done
