"""`spec.restartStrategy` and `spec.failureDetection` reach `sluice run` as its own flags."""

from __future__ import annotations

import argparse
from typing import Any

from sluice.cli import parser
from sluice_operator import manifests as m

from ._fixtures import run


def _run_args(**spec: Any) -> argparse.Namespace:
    args = m.sluice_run_args(run(**spec))
    # The runtime's own parser: a flag the operator passes that `sluice run` lacks fails here.
    return parser().parse_args(["run", *args])


def test_defaults_restart_exponentially_and_tolerate_no_failed_checkpoint() -> None:
    parsed = _run_args()
    assert (parsed.restart_strategy, parsed.restart_delay, parsed.restart_max_delay) == (
        "exponential",
        1.0,
        60.0,
    )
    assert (parsed.max_restarts, parsed.restart_reset_after) == (20, 3600.0)
    assert (parsed.heartbeat_timeout, parsed.tolerable_checkpoint_failures) == (10.0, 0)


def test_a_spec_sets_each_of_them() -> None:
    parsed = _run_args(
        restartStrategy={"kind": "fixed-delay", "delay": "5s", "maxRestarts": 2, "resetAfter": "30m"},
        failureDetection={"heartbeatTimeout": "45s", "tolerableCheckpointFailures": None},
    )
    assert (parsed.restart_strategy, parsed.restart_delay, parsed.max_restarts) == ("fixed-delay", 5.0, 2)
    assert parsed.restart_reset_after == 1800.0
    assert (parsed.heartbeat_timeout, parsed.tolerable_checkpoint_failures) == (45.0, None)
