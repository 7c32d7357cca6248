"""Which class-data archive a Spark driver JVM uses: one per Spark, Java and extra driver class path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sluice.hosts.spark._class_data import archive_path, java_options

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
