#!/usr/bin/env bash
# Makes the image's base from Debian packages, for machines that cannot pull python:3.11-slim-bookworm:
# a Debian bookworm root file system made by mmdebstrap with Python 3.11, the Java 17 runtime, tini and
# procps (the Dockerfile's base stage then installs nothing), written as a tar of that file system.
#
#   docker/base-image.sh            prints the path of the tar, building it first if it is not cached
#
# The tar is cached under ${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/images/, named by a
# hash of the package list, the suite and this script, so every clone on the machine reuses it.
# scripts/build-image.sh --local-base imports it into the builder. Needs mmdebstrap (root, or unshare
# mode with subuids); progress goes to stderr.
set -euo pipefail

suite=bookworm
packages=(python3 python3-venv openjdk-17-jre-headless tini procps ca-certificates)
mirrors=(
    "deb http://deb.debian.org/debian $suite main"
    "deb http://deb.debian.org/debian $suite-updates main"
    "deb http://deb.debian.org/debian-security $suite-security main"
)

log() { printf 'base-image: %s\n' "$*" >&2; }

key=$( { printf '%s\n' "$suite" "${packages[@]}" "${mirrors[@]}"; cat "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-16)
cache=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/images
out=$cache/debian-$suite-base-$key.tar
if [[ -s $out ]]; then
    echo "$out"
    exit 0
fi
if ! command -v mmdebstrap >/dev/null; then
    log "mmdebstrap is missing: install it (apt-get install mmdebstrap; scripts/install-system-deps.sh does)"
    exit 1
fi
mkdir -p "$cache"
exec 9>"$out.lock"
flock 9
if [[ -s $out ]]; then
    echo "$out"
    exit 0
fi
log "building $out with mmdebstrap"
start=$SECONDS
packages_csv=$(IFS=,; echo "${packages[*]}")
# Documentation, manuals and translations are of no use in a container; apt's lists are fetched again
# by whoever installs more. The manual directories stay (empty): update-alternatives, run by the Java
# package, links manual pages into them and fails without them.
debs=$cache/debs-$suite
mkdir -p "$debs"
# The .deb files are kept between builds (a changed package list downloads only what is new).
mmdebstrap --verbose --variant=apt --include="$packages_csv" \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --skip=essential/unlink \
    --setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
    --setup-hook='for n in 1 2 3 4 5 6 7 8; do mkdir -p "$1/usr/share/man/man$n"; done' \
    --setup-hook="sync-in '$debs' /var/cache/apt/archives/" \
    --customize-hook="sync-out /var/cache/apt/archives '$debs'" \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/archives/*.deb "$1"/var/cache/apt/*.bin "$1"/var/log/*.log' \
    "$suite" "$out.tmp.tar" "${mirrors[@]}" >&2
mv "$out.tmp.tar" "$out"
log "built in $((SECONDS - start)) s ($(du -h "$out" | cut -f1))"
echo "$out"
