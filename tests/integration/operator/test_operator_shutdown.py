"""The operator stops cleanly while its StreamJob daemons sleep between reconciles (a real kube-apiserver).

kopf ends `kopf.run` by re-raising the error of any task left in the event loop. A daemon that slept
with `await stopped.wait(n)` had kopf run that wait in a task of its own, which ends with TimeoutError
when `n` passes: one still pending at exit made the operator exit 1 with that traceback on SIGTERM.
"""

from __future__ import annotations

import pytest

from testkit.kube import KubeEnv, streamjob_manifest

from .conftest import RunningOperator

pytestmark = pytest.mark.kube

JOBS = 4


# Reconciles come often, so that the daemons are between two of them whenever the operator stops.
@pytest.mark.parametrize("operator", [{"SLUICE_OPERATOR_RECONCILE_INTERVAL": "50ms"}], indirect=True)
def test_stopped_while_its_daemons_sleep_the_operator_ends_without_an_error(
    kube_env: KubeEnv, kube_namespace: str, operator: RunningOperator
) -> None:
    for index in range(JOBS):
        kube_env.kubectl(
            "apply", "-f", "-", input=streamjob_manifest(f"sleeper-{index}"), namespace=kube_namespace
        )
    for index in range(JOBS):
        kube_env.wait_for(
            f"streamjob sleeper-{index}",
            lambda o: bool(o.get("status", {}).get("job", {}).get("id")),
            namespace=kube_namespace,
            timeout=60,
        )

    operator.stop()

    assert not operator.running()
    assert operator.ended_with == [], operator.ended_with
