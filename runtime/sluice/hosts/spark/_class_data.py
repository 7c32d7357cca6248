"""A class-data-sharing archive of Spark's classes, so that later driver JVMs start 2 s or more sooner.

Most of a cold Spark start is the JVM loading and verifying some ten thousand classes from Spark's jars.
Java 13+ can dump the classes an application loaded into an archive when the JVM exits
(`-XX:ArchiveClassesAtExit`) and map that archive at the next start (`-XX:SharedArchiveFile`). The first
`sluice run` on a machine writes the archive (the dump happens after the job, as the JVM exits); every
later one starts from it. An archive that does not match the JVM or the class path is ignored by the
JVM (with a note in Spark's log), so a stale archive costs speed, never correctness.

The archive lives in `$SLUICE_CACHE_DIR` (default `~/.cache/sluice`), one per Spark version, Spark home,
Java binary and extra driver class path (on Kubernetes the driver also loads Sluice's feature-step jar,
and an archive is only valid for the class path it was dumped with). Every virtual environment is a
Spark home of its own, so each new clone or venv adds an archive of about 100 MB: the directory keeps
the `_KEEP` most recently used ones and removes the rest, and dumps that no JVM finished or that were
left for a day. `SLUICE_CACHE_DIR=off` disables
it; an unwritable cache directory does too, and so does one that someone else could write to (another
owner, group- or world-writable, a symbolic link: see `_private_dirs.py`), with a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from sluice._private_dirs import PrivateDirectoryError, private_directory

log = logging.getLogger(__name__)

# Without /proc to tell whether the dumping JVM still runs: a dump younger than this may be unfinished.
_SETTLED_S = 60.0
# Archives kept: a machine's few live environments (each with a local and a Kubernetes class path).
_KEEP = 8
# A dump of another archive that no start adopted within this long belongs to an environment gone.
_ABANDONED_S = 86400.0


def cache_dir(env: Mapping[str, str]) -> Path | None:
    configured = env.get("SLUICE_CACHE_DIR")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sluice"


def _java(env: Mapping[str, str]) -> str | None:
    # The JVM spark-submit runs: $JAVA_HOME/bin/java, else `java` on the PATH.
    home = env.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def archive_path(
    directory: Path, spark_version: str, spark_home: str, java: str, extra_class_path: str = ""
) -> Path:
    identity = "\0".join(
        [spark_version, os.path.realpath(spark_home), java, str(os.stat(java).st_mtime_ns), extra_class_path]
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return directory / f"spark-{spark_version}-{digest}.jsa"


def java_options(
    spark_version: str,
    spark_home: str,
    env: Mapping[str, str] | None = None,
    extra_class_path: str = "",
) -> list[str]:
    """JVM options that use the archive, or that write it when this JVM exits; [] when unavailable."""
    env = os.environ if env is None else env
    directory, java = cache_dir(env), _java(env)
    if directory is None or java is None:
        return []
    try:
        # The JVM trusts the archive it maps as it trusts its own jars: only this user may have put it
        # there. A directory someone else could write to is not used (and not fixed: say so).
        private_directory(directory.parent, directory.name, confidential=False)
    except PrivateDirectoryError as err:
        log.warning("no class-data archive, Spark starts slower: %s", err)
        return []
    except OSError:
        return []
    archive = archive_path(directory, spark_version, spark_home, java, extra_class_path)
    _adopt_settled_dumps(archive)
    _remove_unused(directory, archive)
    if archive.exists():
        with contextlib.suppress(OSError):
            os.utime(archive)  # its modification time is when it was last used: _remove_unused keeps it
        return [f"-XX:SharedArchiveFile={archive}"]
    try:
        probe = directory / f".probe-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError:
        return []
    # Each JVM dumps to a file of its own; a later start adopts a finished one (no two writers).
    return [f"-XX:ArchiveClassesAtExit={archive}.{os.getpid()}-{time.time_ns()}.tmp"]


def _adopt_settled_dumps(archive: Path) -> None:
    dumps = sorted(archive.parent.glob(archive.name + ".*.tmp"))
    if not dumps:
        return
    writing = _paths_in_running_commands(dumps)
    now = time.time()
    for dump in dumps:
        try:
            finished = dump not in writing if writing is not None else now - dump.stat().st_mtime > _SETTLED_S
            settled = finished and dump.stat().st_size > 0
            if settled and not archive.exists():
                os.replace(dump, archive)
            elif settled:
                dump.unlink()
        except OSError:
            continue  # another start adopted or removed it


def _remove_unused(directory: Path, archive: Path) -> None:
    """Keeps the `_KEEP` most recently used archives besides `archive`, and no abandoned dumps. A JVM
    that maps a removed archive keeps its mapping; the next start of that environment dumps anew."""
    archives: list[tuple[float, Path]] = []
    for other in directory.glob("spark-*.jsa"):
        with contextlib.suppress(OSError):
            if other != archive:
                archives.append((other.stat().st_mtime, other))
    archives.sort(reverse=True)
    for _, old in archives[_KEEP - 1 :]:
        with contextlib.suppress(OSError):
            old.unlink()
    now = time.time()
    abandoned = []
    for dump in directory.glob("spark-*.jsa.*.tmp"):
        with contextlib.suppress(OSError):
            if not dump.name.startswith(archive.name + ".") and now - dump.stat().st_mtime > _ABANDONED_S:
                abandoned.append(dump)
    if not abandoned:
        return
    writing = _paths_in_running_commands(abandoned) or set()
    for dump in abandoned:
        if dump not in writing:
            with contextlib.suppress(OSError):
                dump.unlink()


def _paths_in_running_commands(paths: list[Path]) -> set[Path] | None:
    """Those of `paths` named on the command line of a running process (a JVM still dumping there)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    wanted = {str(p).encode(): p for p in paths}
    found: set[Path] = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        found.update(path for text, path in wanted.items() if text in command)
    return found
