"""Spark's zips of PySpark and Py4J come off a worker's import path where the packages are installed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyspark

from sluice.hosts.spark._worker_path import drop_spark_zips, drop_spark_zips_from_environment

SPARK_LIB = Path(pyspark.__file__).parent / "python" / "lib"


def _package(root: Path, name: str) -> str:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    return str(root)


def test_zips_of_installed_packages_and_their_importers_go(tmp_path: Path) -> None:
    site = _package(tmp_path / "site", "pyspark")
    _package(tmp_path / "site", "py4j")
    spark_zip, py4j_zip = "/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-0.10.9.9-src.zip"
    path = [spark_zip, py4j_zip, "", site]
    importers = {spark_zip: object(), f"{spark_zip}/pyspark": object(), py4j_zip: object(), site: object()}
    assert drop_spark_zips(path, importers) == [spark_zip, py4j_zip]
    assert path == ["", site]
    assert list(importers) == [site], "no importer is left to read a zip again"


def test_a_zip_whose_package_is_nowhere_else_stays(tmp_path: Path) -> None:
    site = _package(tmp_path / "site", "py4j")
    path = ["/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-0.10.9.9-src.zip", site, "/other.zip"]
    assert drop_spark_zips(path, {}) == ["/spark/python/lib/py4j-0.10.9.9-src.zip"]
    assert path == ["/spark/python/lib/pyspark.zip", site, "/other.zip"]


def test_a_worker_with_spark_s_path_imports_the_installed_pyspark() -> None:
    # The daemon's own first step, in a process whose path is laid out as Spark lays out a worker's.
    zips = f"{SPARK_LIB / 'pyspark.zip'}:{next(SPARK_LIB.glob('py4j-*-src.zip'))}"
    probe = (
        "import sys; from sluice.hosts.spark._worker_path import drop_spark_zips; "
        "drop_spark_zips(sys.path, sys.path_importer_cache); import pyspark.worker, pyspark; "
        "print(pyspark.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env={"PYTHONPATH": zips}
    )
    assert done.stdout.strip() == str(Path(pyspark.__file__)), "not the copy inside pyspark.zip"


def test_the_pythonpath_a_taskmanager_s_children_inherit_loses_the_zips_of_installed_packages(
    tmp_path: Path,
) -> None:
    site = _package(tmp_path / "site", "pyspark")
    spark_zip, py4j_zip = "/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-0.10.9.9-src.zip"
    environ = {"PYTHONPATH": f"{spark_zip}:{py4j_zip}:/job/files"}
    assert drop_spark_zips_from_environment(environ, ["", site]) == [spark_zip]
    assert environ["PYTHONPATH"] == f"{py4j_zip}:/job/files", "py4j is installed nowhere: it stays"


def test_an_environment_without_spark_s_zips_is_left_as_it_is(tmp_path: Path) -> None:
    site = _package(tmp_path / "site", "pyspark")
    environ = {"PYTHONPATH": "/job/files", "OTHER": "x"}
    assert drop_spark_zips_from_environment(environ, [site]) == []
    assert environ == {"PYTHONPATH": "/job/files", "OTHER": "x"}
    assert drop_spark_zips_from_environment({}, [site]) == []
