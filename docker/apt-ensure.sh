#!/bin/sh
# apt-ensure PACKAGE...: installs those of the Debian packages that are not installed yet, and touches
# apt (and the network) only if one is missing. The image's base may be the public python:slim image,
# which has none of them, or the local base of docker/base-image.sh, which has the runtime's already.
set -eu
missing=
for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' \
        || missing="$missing $package"
done
[ -n "$missing" ] || exit 0
apt-get update
# shellcheck disable=SC2086 # one word per package
apt-get install -y --no-install-recommends $missing
rm -rf /var/lib/apt/lists/*
