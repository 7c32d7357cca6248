#!/usr/bin/env bash
# Creates .venv with the locked dependencies (uv.lock) and Sluice installed in editable mode.
# Needs python3 (3.11 or 3.12), the package index and a JDK 17+ (for scripts/build-jvm.sh); installs the
# pinned uv with pip if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.9
# uv's download and build cache is the machine's, beside the other caches test.sh keeps
# (~/.cache/sluice/: the Kubernetes binaries, the images): a fresh clone on this machine installs from
# it instead of downloading every package again (33 s of a fresh clone's set-up when it was per clone).
export UV_CACHE_DIR="${UV_CACHE_DIR:-${SLUICE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice}/uv}"
export UV_PYTHON_DOWNLOADS=never
export UV_LINK_MODE=copy

uv_bin() {
    if command -v uv >/dev/null && [ "$(uv --version | awk '{print $2}')" = "$UV_VERSION" ]; then
        command -v uv
    elif [ -x .cache/uv-bin/bin/uv ]; then
        echo .cache/uv-bin/bin/uv
    else
        python3 -m pip install --quiet --disable-pip-version-check --target .cache/uv-bin/pkgs "uv==$UV_VERSION" >&2
        mkdir -p .cache/uv-bin/bin
        ln -sf ../pkgs/bin/uv .cache/uv-bin/bin/uv
        echo .cache/uv-bin/bin/uv
    fi
}

UV=$(uv_bin)
# Bytecode now, once: where PYTHONDONTWRITEBYTECODE is set (CI images, this project's Dockerfile) no
# process writes it, and every interpreter the tests start (a coordinator, each TaskManager, Spark's
# Python daemon) would compile its imports from source again, about half of its start-up CPU.
"$UV" sync --frozen --all-extras --python "${SLUICE_PYTHON:-python3}" --quiet --compile-bytecode
.venv/bin/python -m compileall -q -j 0 runtime operator >/dev/null
scripts/build-jvm.sh
echo "setup: .venv ready ($(.venv/bin/python --version))" >&2
