"""Pod IPs: distinct loopback addresses, so that servers in different pods can use the same port.

Linux routes all of 127.0.0.0/8 to the loopback interface, so any 127.x.y.z can be bound without
configuring anything. Addresses are never reused within a kubelet's life (no TIME_WAIT surprises).
Each process kubelet of the machine (concurrent test sessions, pytest-xdist workers) holds a /16 of its
own (`claim_pod_cidr`), or two kubelets' pods could get one address and contend for its ports.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import itertools
import random
from pathlib import Path
from typing import IO

CLAIMS = Path("/run/sluice-process-kubelet/pod-cidrs")
_SECOND_OCTETS = range(16, 251)


def claim_pod_cidr(claims: Path = CLAIMS) -> tuple[str, IO[str]]:
    """A loopback /16 no other process kubelet of the machine holds, and the open lock file that holds
    it: the claim lasts until that file is closed (at the latest when this process ends)."""
    claims.mkdir(parents=True, exist_ok=True)
    for octet in random.sample(_SECOND_OCTETS, len(_SECOND_OCTETS)):
        lock = open(claims / f"127.{octet}.lock", "a")  # noqa: SIM115 - held open for the kubelet's life
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return f"127.{octet}.0.0/16", lock
    first, last = _SECOND_OCTETS[0], _SECOND_OCTETS[-1]
    raise RuntimeError(f"every loopback /16 from 127.{first} to 127.{last} is held by a process kubelet")


def release_pod_cidr(lock: IO[str]) -> None:
    with contextlib.suppress(OSError):
        lock.close()


class IpPool:
    def __init__(self, cidr: str) -> None:
        network = ipaddress.IPv4Network(cidr)
        if not network.subnet_of(ipaddress.IPv4Network("127.0.0.0/8")):
            raise ValueError(f"pod CIDR {cidr} must be inside 127.0.0.0/8 (loopback) for the process kubelet")
        # Skip addresses ending in .0 or .255 and the ones the host itself uses (127.0.0.1, 127.0.1.1).
        self._hosts = (
            str(address)
            for address in itertools.islice(network.hosts(), 1, None)
            if address.packed[-1] not in (0, 255) and str(address) not in ("127.0.0.1", "127.0.1.1")
        )
        self.cidr = str(network)

    def allocate(self) -> str:
        try:
            return next(self._hosts)
        except StopIteration:
            raise RuntimeError(f"pod CIDR {self.cidr} is exhausted") from None
