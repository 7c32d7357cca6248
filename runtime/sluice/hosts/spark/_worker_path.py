"""The import path of Spark's Python workers: Spark's own zips of PySpark and Py4J come off it where the
same packages are installed, and off the PYTHONPATH a TaskManager's own child processes inherit.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` and `py4j-*-src.zip` first on a worker's PYTHONPATH.
Where the packages are installed as well (`pip install pyspark`, which Sluice depends on), importing
from the zips only costs: a zip holds no compiled bytecode, so every daemon compiled PySpark's worker
from source (1.0 against 0.6 CPU seconds from the installed package, measured without cached bytecode;
less again with it), and every forked worker read each zip's directory (1,485 entries for pyspark.zip)
again, because PySpark's worker calls `importlib.invalidate_caches()` when it puts its task's files on
the path (bench/README.md, "Where the Spark host loses time").
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import Any

_ZIPPED_PACKAGES = {"pyspark.zip": "pyspark", "py4j-": "py4j"}
"""Spark's zip (by name, or name prefix) and the package it holds."""


def _package_in(zip_name: str) -> str | None:
    if not zip_name.endswith(".zip"):
        return None
    for prefix, package in _ZIPPED_PACKAGES.items():
        if zip_name == prefix or (prefix.endswith("-") and zip_name.startswith(prefix)):
            return package
    return None


def drop_spark_zips(path: list[str], importers: MutableMapping[str, Any]) -> list[str]:
    """Takes off `path` (sys.path) Spark's zips of packages that another entry of it holds as plain
    directories, and their importers out of `importers` (sys.path_importer_cache), so that nothing reads
    them again. Returns the entries taken off; a zip whose package is nowhere else stays."""
    directories = [entry for entry in path if entry and not entry.endswith(".zip")]
    dropped = []
    for entry in list(path):
        package = _package_in(os.path.basename(entry))
        if package is not None and any(
            os.path.isfile(os.path.join(directory, package, "__init__.py")) for directory in directories
        ):
            path.remove(entry)
            dropped.append(entry)
    for cached in list(importers):
        if any(cached == entry or cached.startswith(entry + os.sep) for entry in dropped):
            del importers[cached]
    return dropped


def drop_spark_zips_from_environment(environ: MutableMapping[str, str], path: list[str]) -> list[str]:
    """Takes Spark's zips off `environ`'s PYTHONPATH where `path` (this interpreter's sys.path, which a
    child of the same interpreter shares) holds their packages as plain directories. A TaskManager's
    children (a compaction process per compaction) import nothing of PySpark, but with the zips first
    on their path every import of theirs looked inside both zips first: about 0.04 CPU s more per
    process to import the compactor (0.36-0.37 against 0.31-0.34, 3 runs each)."""
    entries = environ.get("PYTHONPATH", "").split(os.pathsep)
    directories = [entry for entry in path if entry and not entry.endswith(".zip")]
    dropped = [entry for entry in entries if _installed(entry, directories)]
    if dropped:
        environ["PYTHONPATH"] = os.pathsep.join(entry for entry in entries if entry not in dropped)
    return dropped


def _installed(zip_path: str, directories: list[str]) -> bool:
    package = _package_in(os.path.basename(zip_path))
    return package is not None and any(
        os.path.isfile(os.path.join(directory, package, "__init__.py")) for directory in directories
    )
