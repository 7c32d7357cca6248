#!/usr/bin/env bash
# Entrypoint of the Sluice image: `operator`, `coordinator`, `executor`, or any command passed through.
#
# The same script runs on a plain host (the test suite's process kubelet executes pods' containers with
# it), so nothing here assumes the image's layout beyond these variables:
#   SLUICE_HOME    where examples/ and pipelines live; coordinator pipelines are resolved from here
#                  (default: the folder above this script's: /opt/sluice in the image, the checkout
#                  on a host)
#   SLUICE_PYTHON  the Python that has Sluice installed (default: $SLUICE_HOME/.venv/bin/python if there
#                  is one, else python3)
#   SPARK_HOME     Spark's home (default: the installed pyspark package directory)
#   JAVA_HOME      the JVM for executors (default: `java` on PATH)
#   SLUICE_ENTRYPOINT_DRY_RUN=1  print the command, one argument per line, instead of running it
set -euo pipefail

if [[ -z "${SLUICE_HOME:-}" ]]; then
  SLUICE_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fi
if [[ -z "${SLUICE_PYTHON:-}" ]]; then
  if [[ -x "$SLUICE_HOME/.venv/bin/python" ]]; then
    SLUICE_PYTHON="$SLUICE_HOME/.venv/bin/python"
  else
    SLUICE_PYTHON=python3
  fi
fi
export SLUICE_HOME SLUICE_PYTHON

usage() {
  cat <<'USAGE'
usage: entrypoint.sh MODE [ARGS...]
  operator [ARGS...]      run the Kubernetes operator (sluice-operator ARGS)
  coordinator ARGS...     run a job: `sluice run ARGS` from $SLUICE_HOME (the Spark driver on Kubernetes)
  executor                a Spark executor (TaskManager) following Spark's Kubernetes executor contract
  COMMAND [ARGS...]       run any other command as is
USAGE
}

run() {
  if [[ "${SLUICE_ENTRYPOINT_DRY_RUN:-}" == 1 ]]; then
    printf '%s\n' "$@"
    exit 0
  fi
  exec "$@"
}

spark_home() {
  if [[ -n "${SPARK_HOME:-}" ]]; then
    printf '%s' "$SPARK_HOME"
  else
    "$SLUICE_PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__), end="")'
  fi
}

executor() {
  # What Spark's Kubernetes scheduler backend puts into an executor pod's environment.
  local missing=()
  for name in SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_APPLICATION_ID \
              SPARK_EXECUTOR_POD_IP SPARK_EXECUTOR_MEMORY; do
    [[ -n "${!name:-}" ]] || missing+=("$name")
  done
  if (( ${#missing[@]} )); then
    echo "entrypoint.sh executor: missing ${missing[*]}; this mode is started by Spark's Kubernetes backend" >&2
    exit 2
  fi
  local home java classpath
  home="$(spark_home)"
  export SPARK_HOME="$home"
  java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  classpath="${SPARK_CONF_DIR:-$home/conf}:${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$home/jars/*"
  [[ -z "${SPARK_EXTRA_CLASSPATH:-}" ]] || classpath="$classpath:$SPARK_EXTRA_CLASSPATH"
  [[ -z "${SPARK_DIST_CLASSPATH:-}" ]] || classpath="$classpath:$SPARK_DIST_CLASSPATH"
  # Python workers of this executor run the same interpreter as the coordinator's.
  export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$SLUICE_PYTHON}"
  # JVM options arrive as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... and keep that order.
  local opts=()
  while IFS= read -r line; do
    opts+=("${line#*=}")
  done < <(env | grep -E '^SPARK_JAVA_OPT_[0-9]+=' | sort -t_ -k4 -n || true)
  # An executor reads a mounted spark.authenticate.secret.file only if spark.master names Kubernetes,
  # also while it fetches the driver's settings, when its configuration is nothing but these flags:
  # Spark passes no spark.master to executors and refuses -Dspark.* in spark.executor.extraJavaOptions.
  # The driver's settings replace this value once fetched.
  if [[ -n "${KUBERNETES_SERVICE_HOST:-}" && -n "${KUBERNETES_SERVICE_PORT:-}" ]]; then
    local api="$KUBERNETES_SERVICE_HOST"
    [[ "$api" != *:* ]] || api="[$api]"
    opts+=("-Dspark.master=k8s://https://$api:$KUBERNETES_SERVICE_PORT")
  fi
  run "$java" "${opts[@]}" \
    "-Xms$SPARK_EXECUTOR_MEMORY" "-Xmx$SPARK_EXECUTOR_MEMORY" \
    -cp "$classpath" \
    org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    --driver-url "$SPARK_DRIVER_URL" \
    --executor-id "$SPARK_EXECUTOR_ID" \
    --cores "$SPARK_EXECUTOR_CORES" \
    --app-id "$SPARK_APPLICATION_ID" \
    --hostname "$SPARK_EXECUTOR_POD_IP" \
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
    --podName "${SPARK_EXECUTOR_POD_NAME:-${HOSTNAME:-executor}}"
}

mode="${1:-}"
case "$mode" in
  operator)
    shift
    run "$SLUICE_PYTHON" -m sluice_operator "$@"
    ;;
  coordinator)
    shift
    if (( $# == 0 )); then
      echo "entrypoint.sh coordinator: give the arguments of \`sluice run\` (PIPELINE.py ...)" >&2
      exit 2
    fi
    cd "$SLUICE_HOME"
    export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$SLUICE_PYTHON}"
    export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$SLUICE_PYTHON}"
    run "$SLUICE_PYTHON" -c 'import sys; from sluice.cli import main; sys.exit(main())' run "$@"
    ;;
  executor)
    shift
    executor
    ;;
  "" | -h | --help | help)
    usage
    ;;
  *)
    run "$@"
    ;;
esac
