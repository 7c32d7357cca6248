"""Each process kubelet of a machine holds a loopback /16 of its own for its pods' IPs, so pods of
concurrent test sessions or pytest-xdist workers never share an address (and its ports)."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.kubelet._ips import claim_pod_cidr, release_pod_cidr


def test_claims_are_distinct_until_released(tmp_path: Path) -> None:
    held = [claim_pod_cidr(tmp_path) for _ in range(235)]
    cidrs = [cidr for cidr, _ in held]
    assert len(set(cidrs)) == 235
    assert all(cidr.startswith("127.") and cidr.endswith(".0.0/16") for cidr in cidrs)
    with pytest.raises(RuntimeError, match=r"every loopback /16 from 127\.16 to 127\.250 is held"):
        claim_pod_cidr(tmp_path)

    cidr, lock = held[100]
    release_pod_cidr(lock)
    assert claim_pod_cidr(tmp_path)[0] == cidr, "a released range is free again"
