"""Pod IPs: distinct loopback addresses, so that servers in different pods can use the same port.

Linux routes all of 127.0.0.0/8 to the loopback interface, so any 127.x.y.z can be bound without
configuring anything. Addresses are never reused within a kubelet's life (no TIME_WAIT surprises).
"""

from __future__ import annotations

import ipaddress
import itertools


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
