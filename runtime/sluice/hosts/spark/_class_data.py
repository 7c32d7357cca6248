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

A pod's HOME is an emptyDir that dies with the pod, so on Kubernetes every coordinator would start cold
and dump for nothing. The image ships an archive instead, dumped when it was built
(`_class_data_image.py`), in the read-only directory `$SLUICE_CLASS_DATA_DIR` names; an archive found
there for this JVM, Spark and class path is used as it is and nothing is dumped. Such a directory must
be this user's or root's and writable by nobody else, as the JVM's own files are.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from sluice._private_dirs import PrivateDirectoryError, private_directory

log = logging.getLogger(__name__)

# Part of every archive's name: archives adopted before dumps were tried out first (see
# adopt_settled_dumps) may be cut short, so they are not used (and go as unused ones do).
_FORMAT = "tried"
# A read-only directory of archives dumped ahead of time (the image's): used, never written.
SHIPPED_DIR_ENV = "SLUICE_CLASS_DATA_DIR"
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


def java_binary(env: Mapping[str, str]) -> str | None:
    # The JVM spark-submit runs: $JAVA_HOME/bin/java, else `java` on the PATH.
    home = env.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def archive_path(
    directory: Path, spark_version: str, spark_home: str, java: str, extra_class_path: str = ""
) -> Path:
    identity = "\0".join(
        [
            _FORMAT,
            spark_version,
            os.path.realpath(spark_home),
            java,
            str(os.stat(java).st_mtime_ns),
            extra_class_path,
        ]
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
    directory, java = cache_dir(env), java_binary(env)
    if java is None:
        return []
    shipped = _shipped_archive(env, spark_version, spark_home, java, extra_class_path)
    if shipped is not None:
        return [f"-XX:SharedArchiveFile={shipped}"]
    if directory is None:
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
    adopt_settled_dumps(archive, java)
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


def _shipped_archive(
    env: Mapping[str, str], spark_version: str, spark_home: str, java: str, extra_class_path: str
) -> Path | None:
    """The archive the image ships for exactly this JVM, Spark and class path, if there is one."""
    configured = env.get(SHIPPED_DIR_ENV)
    if not configured:
        return None
    directory = Path(configured)
    archive = archive_path(directory, spark_version, spark_home, java, extra_class_path)
    try:
        found = [os.lstat(directory), os.lstat(archive)]
    except OSError:
        return None  # none for this class path (a user's extra jars, say): start without one
    for path, info in zip((directory, archive), found, strict=True):
        if stat.S_ISLNK(info.st_mode) or info.st_uid not in (0, os.geteuid()) or info.st_mode & 0o022:
            log.warning(
                "not using the class-data archive %s: %s is a symbolic link, another user's, or writable "
                "by others, and the JVM would trust what is in it (%s must hold only root's or your files)",
                archive,
                path,
                SHIPPED_DIR_ENV,
            )
            return None
    return archive


def adopt_settled_dumps(archive: Path, java: str) -> None:
    """Makes a finished dump `archive`, once the JVM has shown that it maps it; removes the others.

    A JVM killed while it dumps (a pod deleted as its job ends, say) leaves a file cut short, and a JVM
    that maps such a file dies of SIGBUS before it runs anything: adopted, it would keep every later
    driver from starting. So a dump is adopted only once `java -version` has started from it; that
    JVM maps the whole archive (then drops it, its class path being another: nothing else is checked).
    """
    dumps = sorted(archive.parent.glob(archive.name + ".*.tmp"))
    if not dumps:
        return
    writing = _paths_in_running_commands(dumps)
    now = time.time()
    for dump in dumps:
        try:
            finished = dump not in writing if writing is not None else now - dump.stat().st_mtime > _SETTLED_S
            if not finished:
                continue
            if not archive.exists() and dump.stat().st_size > 0 and _maps(java, dump):
                os.replace(dump, archive)
            else:
                dump.unlink()
        except OSError:
            continue  # another start adopted or removed it


def _maps(java: str, dump: Path) -> bool:
    try:
        tried = subprocess.run(
            # A dump cut short crashes this JVM: its crash report would land in the caller's directory.
            [java, f"-XX:SharedArchiveFile={dump}", "-Xshare:auto", "-XX:ErrorFile=/dev/null", "-version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if tried.returncode != 0:
        log.warning("a class-data archive the JVM cannot map was left by a JVM that did not finish: removed")
    return tried.returncode == 0


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
