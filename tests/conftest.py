"""Fixtures shared by every test tier: the real services tests run against (see DESIGN.md section 6)."""

import os
from collections.abc import Iterator

import pytest

from testkit.kafka import kafka_broker  # noqa: F401
from testkit.kube import kube_env, kube_namespace, process_kubelet  # noqa: F401
from testkit.postgres import postgres_db, postgres_server  # noqa: F401
from testkit.s3 import s3_bucket, s3_server  # noqa: F401


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
