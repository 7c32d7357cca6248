#!/usr/bin/env bash
# Builds the runtime's small JVM extension for Spark-on-Kubernetes (runtime/sluice/hosts/spark/_jvm/):
# a custom executor feature step that names TaskManager pods `<job>-taskmanager-<n>`. The jar sits next
# to its sources inside the package, where the runtime looks for it (and a wheel build picks it up).
#
# Compiled against the Spark jars of the installed PySpark, so run it after scripts/setup.sh has made
# .venv (setup.sh calls it). Needs a JDK 17+ (`javac`; scripts/install-system-deps.sh installs one).
# Quick when warm: nothing is compiled when the jar is newer than every source and than PySpark.
set -euo pipefail
cd "$(dirname "$0")/.."

python="${SLUICE_VENV_PYTHON:-.venv/bin/python}"
module=runtime/sluice/hosts/spark/_jvm
jar="$module/sluice-spark-kubernetes.jar"
spark_jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')

if ! command -v javac >/dev/null; then
    echo "build-jvm: javac not found: install a JDK 17+ (scripts/install-system-deps.sh does)" >&2
    exit 1
fi
if [ -f "$jar" ] && [ -z "$(find "$module/src" "$spark_jars" -newer "$jar" -print -quit)" ]; then
    exit 0
fi

classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
mapfile -t sources < <(find "$module/src" -name '*.java' | sort)
javac --release 17 -Xlint:all,-path -Werror -d "$classes" -cp "$spark_jars/*" "${sources[@]}"
# Written next to the target and renamed, so that a running driver never sees half a jar.
jar --create --file "$jar.tmp" -C "$classes" .
mv "$jar.tmp" "$jar"
echo "build-jvm: built $jar" >&2
