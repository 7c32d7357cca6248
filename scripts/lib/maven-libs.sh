# Sourced, not run: fetch_maven_libs, the one recipe for jars fetched from Maven Central into .cache/.
#
# fetch_maven_libs NAME POM LIBS JAR CHECK_ONLY
#   NAME      prefix of messages on stderr
#   POM       the pom.xml whose runtime dependencies are wanted
#   LIBS      the cache directory (.cache/<what>/<version>/libs); complete once it holds .complete
#   JAR       a jar file name that must be among them (proves the copy is the right one)
#   CHECK_ONLY  true: download nothing, exit status 3 if a download would be needed
# Prints LIBS on stdout. `mvn dependency:copy-dependencies` writes into a staging directory that is
# renamed into place only when it succeeded, so an interrupted download never looks complete; when
# another run finished first (two checkouts' test runs at once), its copy (in use maybe) is kept.

fetch_maven_libs() {
    local name=$1 pom=$2 libs=$3 jar=$4 check_only=$5 cache staging
    if [[ -f $libs/.complete ]]; then
        echo "$libs"
        return 0
    fi
    if $check_only; then
        echo "$name: $jar and its dependencies are not in $libs; run scripts/$name.sh" >&2
        return 3
    fi
    command -v mvn >/dev/null || { echo "$name: mvn not found (scripts/install-system-deps.sh)" >&2; return 1; }
    echo "$name: fetching $jar and its dependencies from Maven Central into $libs" >&2
    cache=$(dirname "$(dirname "$(dirname "$libs")")")
    mkdir -p "$cache"
    staging=$(mktemp -d "$cache/$name-staging.XXXXXX")
    # shellcheck disable=SC2064  # the trap keeps this staging directory's name
    trap "rm -rf '$staging'" EXIT
    mvn --batch-mode --quiet -f "$pom" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$staging/libs" >&2
    ls "$staging/libs/$jar" >/dev/null
    touch "$staging/libs/.complete"
    mkdir -p "$(dirname "$libs")"
    if [[ ! -f $libs/.complete ]]; then
        rm -rf "$libs"
        mv "$staging/libs" "$libs"
    fi
    echo "$libs"
}
