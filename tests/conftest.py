"""Fixtures shared by every test tier: the real services tests run against.

Each service lives as long as the pytest session (under pytest-xdist: as long as each worker), because
starting it costs seconds: a test that needs a service of its own starts it itself. docs/testing.md
says which tier runs against what.
"""

import os
from collections.abc import Iterator
from typing import Any

import pytest

from testkit.kafka import kafka_broker  # noqa: F401
from testkit.kube import kube_env, kube_namespace, process_kubelet  # noqa: F401
from testkit.postgres import postgres_db, postgres_server  # noqa: F401
from testkit.s3 import s3_bucket, s3_server  # noqa: F401
from testkit.timeline import pytest_runtest_protocol  # noqa: F401

# Under `pytest -n N --dist loadgroup` (scripts/test.sh with SLUICE_TEST_INTEGRATION_WORKERS=N) each
# worker starts the session services its tests use. The expensive ones are shared by keeping every test
# that uses one on one worker, in this order of cost; the process kubelet's pods also share this
# machine's ports (the coordinator's 8081), so its tests must not overlap anyway. Cheaper services
# (PostgreSQL, the S3 server) start per worker.
_SHARED_SERVICES = (("kube", "kube_env"), ("spark", "spark_context"), ("kafka", "kafka_broker"))


# First: pytest-xdist reads the groups in its own hook, which would otherwise run before this one
# when this conftest is loaded at start-up (`pytest tests/e2e`), and see none.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for group, fixture in _SHARED_SERVICES:
            # The `runner` fixture asks for `spark_context` only in its `spark` case, marked `spark`.
            if fixture in fixtures or item.get_closest_marker(group) is not None:
                item.add_marker(pytest.mark.xdist_group(group))
                break


@pytest.fixture(autouse=True, scope="session")
def _own_rest_token_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Jobs store their REST tokens (and the CLI finds them) in a state directory of the test run's own,
    not the user's; a SLUICE_REST_TOKEN of the user's shell would hide the stored-token path."""
    saved = {name: os.environ.get(name) for name in ("XDG_STATE_HOME", "SLUICE_REST_TOKEN")}
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    os.environ.pop("SLUICE_REST_TOKEN", None)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def spark_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local SparkContext (and JVM) for every Spark test of the run.

    Defined here, not in `testkit.spark`: a session fixture imported into several test modules is one
    fixture per module, and would start a SparkContext per module. Imported lazily, so the unit tier
    does not load PySpark.
    """
    from testkit.spark import start_test_spark

    # Under pytest's temporary directory, which keeps the last few runs' (the Spark log, for a failure)
    # and removes older ones: a directory of its own under /tmp was left behind by every run.
    context = start_test_spark(tmp_path_factory.mktemp("spark"))
    try:
        yield context
    finally:
        context.stop()
