# One image for every Sluice process: the operator, the coordinator (Spark driver) and the TaskManagers
# (Spark executors). docker/entrypoint.sh picks the role from its first argument.
#
#   docker build -t sluice:dev .
#   docker run --rm sluice:dev operator --help
#
# scripts/build-image.sh builds it with docker, podman or buildah, and can make the base itself from
# Debian packages (docker/base-image.sh) for machines that cannot pull one:
#   scripts/build-image.sh --local-base
#
# BASE_IMAGE is any Debian bookworm image with Python 3.11 (python3 on PATH): the public default, or
# the local base, which already holds the Java runtime, tini and procps; apt runs only for what is missing.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# What every process needs at run time: Java 17 for Spark; tini reaps the JVM's children and forwards
# signals, as in Spark's own images. The final image is this stage plus the venv and the sources: the
# build's tools (uv, pip, the JDK) and its download cache stay in the stages below.
FROM ${BASE_IMAGE} AS base

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

COPY docker/apt-ensure.sh /usr/local/sbin/apt-ensure
COPY docker/build-ca-env.sh /usr/local/share/sluice/build-ca-env.sh
RUN apt-ensure openjdk-17-jre-headless tini procps \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/sluice-java

ENV JAVA_HOME=/usr/lib/jvm/sluice-java \
    SLUICE_HOME=/opt/sluice

WORKDIR /opt/sluice

# The locked dependencies, installed into /opt/sluice/.venv by uv.
FROM base AS dependencies
ENV UV_PROJECT_ENVIRONMENT=/opt/sluice/.venv \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON=python3 \
    UV_PYTHON_DOWNLOADS=never

# uv in a venv of its own: Debian's python3 has no pip of its own to install into (PEP 668).
RUN --mount=type=secret,id=ca-bundle . /usr/local/share/sluice/build-ca-env.sh \
 && python3 -m venv /opt/uv \
 && /opt/uv/bin/pip install --no-cache-dir --disable-pip-version-check "uv>=0.5,<1" \
 && ln -s /opt/uv/bin/uv /usr/local/bin/uv
# Locked dependencies before the sources, so that code changes do not reinstall them. uv's cache (PySpark's
# sdist, unpacked and built: about 2 GB) is a cache mount: it speeds up the next build without becoming a
# layer.
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=secret,id=ca-bundle --mount=type=cache,target=/root/.cache/uv,sharing=locked \
    . /usr/local/share/sluice/build-ca-env.sh \
 && uv sync --frozen --no-dev --no-install-project --extra operator --extra s3 --extra postgres --extra tls --extra kafka

# The runtime's Spark-on-Kubernetes feature step (names TaskManager pods <job>-taskmanager-<n>), compiled
# against the very Spark jars installed above with the JDK, which only this stage has.
FROM dependencies AS jvm
RUN apt-ensure openjdk-17-jdk-headless
COPY runtime/sluice/hosts/spark/_jvm/src ./runtime/sluice/hosts/spark/_jvm/src
COPY scripts/build-jvm.sh ./scripts/build-jvm.sh
RUN SLUICE_VENV_PYTHON=/opt/sluice/.venv/bin/python scripts/build-jvm.sh

# Sluice itself installed into the venv (not editable: the venv alone runs it), the jar among its files.
# Built from these sources every time this step runs: uv's cache keys a local project's wheel on its
# pyproject.toml alone, so a checkout whose pyproject.toml kept its mtime got a wheel of older sources.
# Its installed files (as its RECORD lists them, with their bytecode) are gathered under /opt/project, so
# that the final image takes them as a small layer of their own: a code change leaves the dependencies'
# layer, most of the image, as it was.
FROM dependencies AS project
COPY runtime ./runtime
COPY --from=jvm /opt/sluice/runtime/sluice/hosts/spark/_jvm/sluice-spark-kubernetes.jar ./runtime/sluice/hosts/spark/_jvm/
COPY operator ./operator
RUN --mount=type=secret,id=ca-bundle --mount=type=cache,target=/root/.cache/uv,sharing=locked \
    . /usr/local/share/sluice/build-ca-env.sh \
 && uv sync --frozen --no-dev --no-editable --reinstall-package sluice \
        --extra operator --extra s3 --extra postgres --extra tls --extra kafka \
 && site=/opt/sluice/.venv/lib/python3.11/site-packages \
 && installed=$(cut -d, -f1 "$site"/sluice-*.dist-info/RECORD) \
 && mkdir /opt/project \
 && { printf '%s\n' "$installed" | grep -v '^\.\./' | cut -d/ -f1 | sort -u | sed "s|^|$site/|"; \
      printf '%s\n' "$installed" | grep '^\.\./' | sed "s|^|$site/|" | xargs -r realpath -m; } \
    | sed 's|^/||' | (cd / && xargs cp -a --parents -t /opt/project)

FROM base
COPY --from=dependencies /opt/sluice/.venv ./.venv
COPY --from=project /opt/project/ /
COPY runtime ./runtime
COPY --from=jvm /opt/sluice/runtime/sluice/hosts/spark/_jvm/sluice-spark-kubernetes.jar ./runtime/sluice/hosts/spark/_jvm/
COPY operator ./operator
COPY examples ./examples
COPY crds ./crds
COPY docker ./docker
RUN chmod 0755 docker/entrypoint.sh

ENV PATH=/opt/sluice/.venv/bin:$PATH \
    SLUICE_PYTHON=/opt/sluice/.venv/bin/python \
    PYSPARK_PYTHON=/opt/sluice/.venv/bin/python \
    SPARK_HOME=/opt/sluice/.venv/lib/python3.11/site-packages/pyspark

# The Kubernetes driver's class-data archive, dumped once here and checked by a JVM that maps it
# (runtime/sluice/hosts/spark/_class_data_image.py): a coordinator pod's HOME dies with the pod, so a
# driver could never reuse an archive of its own, and every coordinator would start its JVM cold.
ENV SLUICE_CLASS_DATA_DIR=/opt/sluice/class-data
RUN /opt/sluice/.venv/bin/python -m sluice.hosts.spark._class_data_image "$SLUICE_CLASS_DATA_DIR" \
 && rm -rf /tmp/* /root/.cache

# Non-root, with group 0 so that clusters running pods under an arbitrary UID can still write HOME.
# Pods run with a read-only root file system: the operator mounts emptyDirs at HOME and /tmp (and at
# Spark's local dirs), so HOME is a directory of its own, not /opt/sluice. /opt/sluice is only read
# (its files are world-readable); a chmod of it would copy all of it into one more layer.
RUN useradd --uid 185 --gid 0 --home-dir /home/sluice --create-home --shell /usr/sbin/nologin sluice \
 && chmod -R g=u /home/sluice
ENV HOME=/home/sluice
USER 185:0

ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/opt/sluice/docker/entrypoint.sh"]
CMD ["--help"]
