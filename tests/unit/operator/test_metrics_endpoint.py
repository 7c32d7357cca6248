"""The operator's /metrics endpoint ends with the operator: an operator started again in the same
process (the integration tests run one per test on a thread) finds no server of an earlier one."""

from __future__ import annotations

import urllib.request

import pytest

from sluice_operator.handlers import metrics
from testkit.ports import free_loopback_port


def _free_port() -> int:
    # Below the ephemeral range, checked free (testkit.ports): a port the kernel hands out for bind(0) can
    # be taken by any outgoing connection before the server binds it (seen: the operator's health port).
    return free_loopback_port()


def test_the_endpoint_serves_until_stopped_and_then_frees_its_port() -> None:
    port = _free_port()
    stop = metrics.serve(port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            assert "sluice_operator_reconciles_total" in answer.read().decode()
    finally:
        stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    again = metrics.serve(port)  # the port is free for the next operator
    again()
