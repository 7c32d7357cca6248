#!/usr/bin/env bash
# Prints the directory holding the jars of the Kafka 4 test broker (KRaft mode, Java 17).
#
# The jars come from Maven Central once: `mvn dependency:copy-dependencies` over hack/kafka/pom.xml
# (org.apache.kafka:kafka_2.13 and kafka-tools at the pinned version, with what they need at run time)
# into .cache/kafka/<version>-<hash of the POM>/libs. Later runs find the directory complete and do nothing, so this is
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
# shellcheck source=lib/maven-libs.sh
source "$repo/scripts/lib/maven-libs.sh"
pom=$repo/hack/kafka/pom.xml
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
[[ -n $version ]] || { echo "kafka-jars: no <kafka.version> in $pom" >&2; exit 1; }
# Named by the POM's content too: a clone whose POM changed (a dependency added) fetches again.
libs=$repo/.cache/kafka/$version-$(sha256sum <"$pom" | cut -c1-12)/libs

fetch_maven_libs kafka-jars "$pom" "$libs" "kafka_2.13-$version.jar" "$check_only"
