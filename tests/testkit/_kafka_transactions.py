"""Kafka's ListTransactions request (API key 66, version 0), spoken over one socket to one broker.

The Python client cannot list transactions, and Kafka's own `TransactionsCommand` is a JVM to start
for every call: seconds each, in every Kafka test that checks nothing was left open. This is the one
request that command sends, in the protocol's flexible encoding (KIP-482): a compact string or array
is its length + 1 as an unsigned varint (0: null), and every structure ends with its tagged fields.
"""

from __future__ import annotations

import socket
import struct

API_KEY, API_VERSION = 66, 0
CLIENT_ID = b"testkit"


class KafkaProtocolError(Exception):
    """The broker answered with an error code, or with bytes this reader cannot take."""


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def request(correlation_id: int) -> bytes:
    """The framed request: every transaction, whatever its state or producer id."""
    # Request header v2: the client id stays a classic (int16-length) string in flexible versions.
    header = struct.pack(">hhih", API_KEY, API_VERSION, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    header += _uvarint(0)  # no tagged fields
    body = _uvarint(1) + _uvarint(1) + _uvarint(0)  # no state filters, no producer id filters, no tags
    message = header + body
    return struct.pack(">i", len(message)) + message


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise KafkaProtocolError(f"response ends at byte {len(self.data)}, {size} more expected")
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack(fmt, self.take(struct.calcsize(fmt)))
        return int(value)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise KafkaProtocolError("an unsigned varint longer than 5 bytes")

    def string(self) -> str:
        size = self.uvarint()
        if size == 0:
            raise KafkaProtocolError("a null string where the protocol has none")
        return self.take(size - 1).decode()

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())


def parse(response: bytes, correlation_id: int) -> list[tuple[str, int, str]]:
    """(transactional id, producer id, state) of each transaction in the response (without its size)."""
    reader = _Reader(response)
    if (answered := reader.unpack(">i")) != correlation_id:
        raise KafkaProtocolError(f"the response answers request {answered}, not {correlation_id}")
    reader.skip_tags()  # response header v1
    reader.unpack(">i")  # throttle time
    if (error := reader.unpack(">h")) != 0:
        raise KafkaProtocolError(f"ListTransactions failed with Kafka error code {error}")
    for _ in range(max(reader.uvarint() - 1, 0)):  # unknown state filters: none were sent
        reader.string()
    transactions = []
    for _ in range(max(reader.uvarint() - 1, 0)):
        transactional_id, producer_id, state = reader.string(), reader.unpack(">q"), reader.string()
        reader.skip_tags()
        transactions.append((transactional_id, producer_id, state))
    reader.skip_tags()
    return transactions


def list_transactions(host: str, port: int, timeout: float = 30.0) -> list[tuple[str, int, str]]:
    """Every transaction the broker at host:port coordinates: (transactional id, producer id, state)."""
    correlation_id = 1
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(request(correlation_id))
        size = struct.unpack(">i", _receive(sock, 4))[0]
        return parse(_receive(sock, size), correlation_id)


def _receive(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise KafkaProtocolError(f"the broker closed the connection after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)
