#!/usr/bin/env bash
# Prints the directory holding the jars of the Kafka 4 test broker (KRaft mode, Java 17).
#
# The jars come from Maven Central once: `mvn dependency:copy-dependencies` over hack/kafka/pom.xml
# (org.apache.kafka:kafka_2.13 and kafka-tools at the pinned version, with what they need at run time)
# into .cache/kafka/<version>/libs. Later runs find the directory complete and do nothing, so this is
# cheap to call before every test run. The copy goes to a temporary directory that is renamed into
# place only when it succeeded: an interrupted download never looks complete.
#
# stdout carries only the directory (libs=$(scripts/kafka-jars.sh)); progress goes to stderr.
# With --check nothing is downloaded: exit status 3 if a download would be needed.
set -euo pipefail

check_only=false
case ${1:-} in
    --check) check_only=true ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pom=$repo/hack/kafka/pom.xml
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
[[ -n $version ]] || { echo "kafka-jars: no <kafka.version> in $pom" >&2; exit 1; }
libs=$repo/.cache/kafka/$version/libs

if [[ -f $libs/.complete ]]; then
    echo "$libs"
    exit 0
fi
if $check_only; then
    echo "kafka-jars: Kafka $version jars are not in $libs; run scripts/kafka-jars.sh" >&2
    exit 3
fi
command -v mvn >/dev/null || { echo "kafka-jars: mvn not found (scripts/install-system-deps.sh)" >&2; exit 1; }

echo "kafka-jars: fetching Kafka $version from Maven Central into $libs" >&2
mkdir -p "$repo/.cache"
staging=$(mktemp -d "$repo/.cache/kafka-staging.XXXXXX")
trap 'rm -rf "$staging"' EXIT
mvn --batch-mode --quiet -f "$pom" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$staging/libs" >&2
ls "$staging/libs"/kafka_2.13-"$version".jar >/dev/null
touch "$staging/libs/.complete"
mkdir -p "$(dirname "$libs")"
# Another run may have finished first (two checkouts' test runs at once): keep its copy, in use maybe.
if [[ ! -f $libs/.complete ]]; then
    rm -rf "$libs"
    mv "$staging/libs" "$libs"
fi
echo "$libs"
