#!/usr/bin/env bash
# Builds the Sluice image from the repository's Dockerfile with docker, podman or buildah, whichever is
# there (docker only if its daemon answers).
#
#   scripts/build-image.sh [--tag NAME] [--builder docker|podman|buildah] [--local-base] [--archive]
#
#   --tag NAME      the image's name (default: localhost/sluice:dev)
#   --builder B     use this builder instead of the first one found
#   --local-base    build the base from Debian packages (docker/base-image.sh) instead of pulling
#                   python:3.11-slim-bookworm: for machines without access to a public registry
#   --archive       also write the image as a docker-archive tar and print its path on stdout (for
#                   `ctr -n k8s.io images import`, `kind load image-archive`, `docker load`)
#
# With --archive the image is cached outside the clone, under
# ${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/images/, keyed on a hash of everything the
# Dockerfile copies, the base and this script: a second run, or another clone on the machine, with the
# same inputs builds nothing. The cold build prints its duration on a line of its own.
# Push the image to your registry with your builder afterwards, e.g.
#   docker tag localhost/sluice:dev registry.example.com/sluice:1.0 && docker push registry.example.com/sluice:1.0
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=localhost/sluice:dev
builder=
local_base=false
archive=false
while (($#)); do
    case $1 in
        --tag) tag=${2:?--tag needs a name}; shift 2 ;;
        --builder) builder=${2:?--builder needs docker, podman or buildah}; shift 2 ;;
        --local-base) local_base=true; shift ;;
        --archive) archive=true; shift ;;
        -h | --help) sed -n '2,20s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "build-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf 'build-image: %s\n' "$*" >&2; }

if [[ -z $builder ]]; then
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        builder=docker
    elif command -v podman >/dev/null; then
        builder=podman
    elif command -v buildah >/dev/null; then
        builder=buildah
    else
        log "no image builder found: install docker (with a running daemon), podman or buildah"
        exit 1
    fi
fi
case $builder in
    docker | podman | buildah) ;;
    *) log "--builder $builder: use docker, podman or buildah"; exit 2 ;;
esac

cache=${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/images
base_args=()
base_key=public
if $local_base; then
    base_tar=$("$repo/docker/base-image.sh")
    base_key=$(basename "$base_tar" .tar)
    base_ref=localhost/sluice-base:${base_key##*-}
    # The base's tar is a root file system; importing it gives the builder an image with no config,
    # so the PATH a Debian image has is set here.
    case $builder in
        buildah) inspect=(buildah inspect --type image) ;;
        *) inspect=("$builder" image inspect) ;;
    esac
    if ! "${inspect[@]}" "$base_ref" >/dev/null 2>&1; then
        log "importing $base_tar as $base_ref"
        path_env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        case $builder in
            docker | podman) "$builder" import --change "ENV $path_env" "$base_tar" "$base_ref" >/dev/null ;;
            buildah)
                ctr=$(buildah from scratch)
                buildah add --quiet "$ctr" "$base_tar" / >/dev/null
                buildah config --env "$path_env" --cmd /bin/bash "$ctr"
                buildah commit --quiet --rm "$ctr" "$base_ref" >/dev/null
                ;;
        esac
    fi
    base_args=(--build-arg "BASE_IMAGE=$base_ref")
fi

# Everything the Dockerfile copies decides the image, and so the cached archive's name.
inputs=(Dockerfile .dockerignore pyproject.toml uv.lock README.md runtime operator examples crds docker
    scripts/build-jvm.sh)
key=$( {
    printf '%s\n' "$base_key" "$tag"
    cat "${BASH_SOURCE[0]}"
    (cd "$repo" && find "${inputs[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.jar' \
        -print0 | sort -z | xargs -0 sha256sum)
} | sha256sum | cut -c1-16)
archive_path=$cache/sluice-$key.tar
if $archive && [[ -s $archive_path ]]; then
    log "reusing $archive_path"
    echo "$archive_path"
    exit 0
fi

# The build trusts the CAs this machine trusts (a TLS-inspecting proxy's, say) while it downloads;
# a secret, so the bundle stays out of the image. SLUICE_BUILD_CA_BUNDLE names another bundle.
ca_bundle=${SLUICE_BUILD_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
secret_args=()
if [[ -s $ca_bundle ]]; then
    secret_args=(--secret "id=ca-bundle,src=$ca_bundle")
fi

log "building $tag with $builder"
start=$SECONDS
case $builder in
    docker) DOCKER_BUILDKIT=1 docker build "${base_args[@]}" "${secret_args[@]}" -t "$tag" "$repo" >&2 ;;
    # Host network for the build's own downloads (Debian packages, PyPI), as docker build has by default.
    podman | buildah)
        "$builder" build --layers --network host "${base_args[@]}" "${secret_args[@]}" -t "$tag" "$repo" >&2 ;;
esac
echo "image build time: $((SECONDS - start)) s" >&2
case $builder in
    # sed, not head: head would end the pipe early when the image has several names, and pipefail
    # would fail the build on buildah's SIGPIPE.
    buildah) size=$(buildah images --noheading --format '{{.Size}}' "$tag" | sed -n 1p) ;;
    *) size="$(($("$builder" image inspect --format '{{.Size}}' "$tag") / 1000000)) MB" ;;
esac
echo "image size: $size" >&2

if $archive; then
    mkdir -p "$cache"
    partial=$archive_path.tmp.$$  # two builds of one image at once must not share it
    case $builder in
        docker) docker save -o "$partial" "$tag" ;;
        podman | buildah) "$builder" push --quiet "$tag" "docker-archive:$partial:$tag" >/dev/null ;;
    esac
    mv "$partial" "$archive_path"
    # Each archive is about 1 GB and a new one is written whenever the sources change: keep the one
    # just built and the newest other (another clone may still be on it), so the cache cannot fill
    # the disk over a day of commits. Unfinished ones older than a day were left by killed builds.
    find "$cache" -maxdepth 1 -name 'sluice-*.tar' ! -path "$archive_path" -printf '%T@ %p\n' \
        | sort -rn | tail -n +2 | cut -d' ' -f2- | xargs -r rm -f
    find "$cache" -maxdepth 1 -name 'sluice-*.tar.tmp.*' -mmin +1440 -delete
    echo "$archive_path"
fi
