"""Which class-data archive a Spark driver JVM uses: one per Spark, Java and extra driver class path."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from sluice.hosts.spark._class_data import SHIPPED_DIR_ENV, archive_path, java_options

JAVA = shutil.which("java")  # scripts/install-system-deps.sh provides it; the archive names include it


def test_an_extra_driver_class_path_gets_an_archive_of_its_own(tmp_path: Path) -> None:
    assert JAVA is not None
    plain = archive_path(tmp_path, "4.3.0", str(tmp_path), JAVA)
    assert archive_path(tmp_path, "4.3.0", str(tmp_path), JAVA) == plain
    # A JVM ignores an archive dumped with another class path: local and Kubernetes drivers (which load
    # the feature-step jar) must not overwrite each other's.
    with_jar = archive_path(tmp_path, "4.3.0", str(tmp_path), JAVA, "/opt/sluice-spark-kubernetes.jar")
    assert with_jar != plain
    assert archive_path(tmp_path, "4.3.1", str(tmp_path), JAVA) != plain


def test_the_first_driver_dumps_and_a_later_one_maps_the_archive(tmp_path: Path) -> None:
    env = {"SLUICE_CACHE_DIR": str(tmp_path), "PATH": str(Path(JAVA or "").parent)}
    (dump,) = java_options("4.3.0", str(tmp_path), env, extra_class_path="/x.jar")
    assert dump.startswith("-XX:ArchiveClassesAtExit=")
    archive = Path(dump.split("=", 1)[1].split(".jsa.", 1)[0] + ".jsa")
    archive.write_bytes(b"archive")
    assert java_options("4.3.0", str(tmp_path), env, extra_class_path="/x.jar") == [
        f"-XX:SharedArchiveFile={archive}"
    ]
    assert java_options("4.3.0", str(tmp_path), env)[0].startswith("-XX:ArchiveClassesAtExit=")
    assert java_options("4.3.0", str(tmp_path), {"SLUICE_CACHE_DIR": "off"}) == []


def test_a_cache_directory_others_can_write_to_is_not_used(tmp_path: Path) -> None:
    # A planted archive would be mapped into the driver JVM as if it were Spark's own classes.
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chmod(cache, 0o777)
    env = {"SLUICE_CACHE_DIR": str(cache), "PATH": str(Path(JAVA or "").parent)}
    archive = archive_path(cache, "4.3.0", str(tmp_path), os.path.realpath(JAVA or ""))
    archive.write_bytes(b"planted")
    assert java_options("4.3.0", str(tmp_path), env) == []


def test_only_the_most_recently_used_archives_and_no_abandoned_dumps_are_kept(tmp_path: Path) -> None:
    # Each clone's venv is a Spark home of its own: without this a machine gains 100 MB per clone.
    env = {"SLUICE_CACHE_DIR": str(tmp_path), "PATH": str(Path(JAVA or "").parent)}
    current = archive_path(tmp_path, "4.3.0", str(tmp_path), os.path.realpath(JAVA or ""))
    current.write_bytes(b"current")
    os.utime(current, (1, 1))  # the oldest of all, yet in use
    others = [tmp_path / f"spark-4.3.0-{n:016x}.jsa" for n in range(12)]
    for age, other in enumerate(others):
        other.write_bytes(b"other")
        os.utime(other, (time.time() - 1000 * (age + 1),) * 2)
    day_old = time.time() - 2 * 86400
    abandoned = tmp_path / f"{others[0].name}.123-456.tmp"
    fresh = tmp_path / f"{others[1].name}.124-457.tmp"
    writing = tmp_path / f"{others[2].name}.125-458.tmp"
    for dump in (abandoned, fresh, writing):
        dump.write_bytes(b"dump")
    os.utime(abandoned, (day_old, day_old))
    os.utime(writing, (day_old, day_old))
    jvm = subprocess.Popen(["sh", "-c", "sleep 30", str(writing)])  # a JVM still dumping there
    # Popen returns once the child's exec is under way, a moment before the kernel gives the new
    # program its command line: a scan in that moment read an empty one and removed the dump (once
    # in the whole suite). A JVM dumping for a day has long had its command line.
    cmdline = Path(f"/proc/{jvm.pid}/cmdline")
    deadline = time.monotonic() + 10
    while str(writing).encode() not in cmdline.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.001)
    try:
        assert java_options("4.3.0", str(tmp_path), env) == [f"-XX:SharedArchiveFile={current}"]
    finally:
        jvm.kill()
        jvm.wait()
    kept = sorted(p.name for p in tmp_path.glob("spark-*.jsa"))
    assert kept == sorted([current.name] + [o.name for o in others[:7]])
    assert current.stat().st_mtime > time.time() - 60  # marked as used
    assert not abandoned.exists()
    assert fresh.exists() and writing.exists()


@pytest.fixture(scope="module")
def whole_dump(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real dynamic archive, of the classes `java -version` loads (a second or so)."""
    assert JAVA is not None
    path = tmp_path_factory.mktemp("dump") / "version.jsa"
    subprocess.run([JAVA, f"-XX:ArchiveClassesAtExit={path}", "-version"], check=True, capture_output=True)
    return path.read_bytes()


@pytest.mark.parametrize("whole", [True, False])
def test_a_dump_cut_short_is_removed_not_adopted(
    tmp_path: Path, whole_dump: bytes, whole: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A JVM that maps an archive cut short (its dumping JVM was killed) dies of SIGBUS at start: adopted,
    # it would keep every later driver from starting.
    env = {"SLUICE_CACHE_DIR": str(tmp_path), "PATH": str(Path(JAVA or "").parent)}
    archive = archive_path(tmp_path, "4.3.0", str(tmp_path), os.path.realpath(JAVA or ""))
    dump = tmp_path / f"{archive.name}.99999-1.tmp"
    dump.write_bytes(whole_dump if whole else whole_dump[: len(whole_dump) // 2])
    monkeypatch.chdir(tmp_path)
    options = java_options("4.3.0", str(tmp_path), env)
    assert not dump.exists()
    assert not list(tmp_path.glob("hs_err_pid*.log"))  # the trial's crash leaves no report behind
    if whole:
        assert options == [f"-XX:SharedArchiveFile={archive}"]
        assert archive.read_bytes() == whole_dump
    else:
        assert not archive.exists()
        assert options[0].startswith("-XX:ArchiveClassesAtExit=")  # dumps anew


def test_an_archive_the_image_ships_is_mapped_and_nothing_is_dumped(tmp_path: Path) -> None:
    shipped, cache = tmp_path / "shipped", tmp_path / "cache"
    shipped.mkdir(mode=0o755)
    java = os.path.realpath(JAVA or "")
    archive = archive_path(shipped, "4.3.0", str(tmp_path), java, "/x.jar")
    archive.write_bytes(b"archive")
    os.chmod(archive, 0o444)
    env = {"SLUICE_CACHE_DIR": str(cache), SHIPPED_DIR_ENV: str(shipped), "PATH": str(Path(java).parent)}
    assert java_options("4.3.0", str(tmp_path), env, extra_class_path="/x.jar") == [
        f"-XX:SharedArchiveFile={archive}"
    ]
    assert not cache.exists()  # nothing dumped, not even the cache made
    # Another class path has no shipped archive: the cache as before.
    assert java_options("4.3.0", str(tmp_path), env)[0].startswith("-XX:ArchiveClassesAtExit=")


@pytest.mark.parametrize("loose", ["directory", "archive"])
def test_a_shipped_archive_others_can_write_to_is_not_mapped(tmp_path: Path, loose: str) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir(mode=0o755)
    java = os.path.realpath(JAVA or "")
    archive = archive_path(shipped, "4.3.0", str(tmp_path), java)
    archive.write_bytes(b"planted?")
    os.chmod(archive, 0o444)
    os.chmod(shipped if loose == "directory" else archive, 0o777 if loose == "directory" else 0o666)
    env = {"SLUICE_CACHE_DIR": "off", SHIPPED_DIR_ENV: str(shipped), "PATH": str(Path(java).parent)}
    assert java_options("4.3.0", str(tmp_path), env) == []
