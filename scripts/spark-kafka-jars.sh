#!/usr/bin/env bash
# Prints the directory holding Spark's Kafka connector (spark-sql-kafka-0-10_2.13) for the installed
# PySpark: the peer of the Kafka benchmark (bench/kafka.py) passes these jars to Spark with spark.jars.
#
# The jars come from Maven Central once: `mvn dependency:copy-dependencies` over hack/spark-kafka/pom.xml
# into .cache/spark-kafka/<version>/libs. Later runs find the directory complete and do nothing. The copy
# goes to a temporary directory renamed into place only when it succeeded, so an interrupted download
# never looks complete. The pinned version should equal PySpark's (the pom says why it may not); a
# mismatch is said on stderr, and bench/kafka.py checks the peer's output record by record.
#
# stdout carries only the directory (jars=$(scripts/spark-kafka-jars.sh)); progress goes to stderr.
# With --check nothing is downloaded: exit status 3 if a download would be needed.
set -euo pipefail

check_only=false
case ${1:-} in
    --check) check_only=true ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/maven-libs.sh
source "$repo/scripts/lib/maven-libs.sh"
pom=$repo/hack/spark-kafka/pom.xml
version=$(sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' "$pom")
[[ -n $version ]] || { echo "spark-kafka-jars: no <spark.version> in $pom" >&2; exit 1; }
python=${PYTHON:-$repo/.venv/bin/python}
if pyspark=$("$python" -c 'import pyspark; print(pyspark.__version__)' 2>/dev/null); then
    if [[ $pyspark != "$version" ]]; then
        echo "spark-kafka-jars: note: PySpark is $pyspark, the connector $version ($pom)" >&2
    fi
fi
libs=$repo/.cache/spark-kafka/$version/libs

fetch_maven_libs spark-kafka-jars "$pom" "$libs" "spark-sql-kafka-0-10_2.13-$version.jar" "$check_only"
