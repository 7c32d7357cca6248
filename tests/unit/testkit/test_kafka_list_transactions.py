"""The test kit's ListTransactions request and response reader (testkit/_kafka_transactions.py), byte by
byte against the protocol's layout; tests/integration/test_kafka_server.py asks a real broker."""

from __future__ import annotations

import struct

import pytest

from testkit._kafka_transactions import KafkaProtocolError, parse, request


def _compact(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data) + 1]) + data


def _response(correlation_id: int, error: int, transactions: list[tuple[str, int, str]]) -> bytes:
    body = struct.pack(">i", correlation_id) + b"\x00"  # response header v1: no tagged fields
    body += struct.pack(">ih", 0, error) + b"\x01"  # throttle time, error, no unknown state filters
    body += bytes([len(transactions) + 1])
    for name, producer, state in transactions:
        body += _compact(name) + struct.pack(">q", producer) + _compact(state) + b"\x00"
    return body + b"\x00"


def test_the_request_asks_for_every_transaction_in_version_0() -> None:
    framed = request(7)
    (size,) = struct.unpack(">i", framed[:4])
    assert size == len(framed) - 4
    api_key, version, correlation_id, client_length = struct.unpack(">hhih", framed[4:14])
    assert (api_key, version, correlation_id) == (66, 0, 7)
    client_end = 14 + client_length
    assert framed[14:client_end] == b"testkit"
    # Header tags, then the body: empty state filters, empty producer id filters, no tags.
    assert framed[client_end:] == b"\x00" + b"\x01\x01\x00"


def test_a_response_gives_each_transaction_with_its_state() -> None:
    listed = [("sluice-job-0-1", 12, "Ongoing"), ("other", 2**40, "CompleteCommit")]
    assert parse(_response(3, 0, listed), 3) == listed
    assert parse(_response(3, 0, []), 3) == []


def test_tagged_fields_of_a_newer_broker_are_skipped() -> None:
    data = bytearray(_response(5, 0, [("t", 1, "Ongoing")]))
    # One tagged field (tag 0, 2 bytes) at the end of the response body.
    data[-1:] = b"\x01\x00\x02ab"
    assert parse(bytes(data), 5) == [("t", 1, "Ongoing")]


def test_an_error_code_a_foreign_correlation_id_or_a_cut_response_is_refused() -> None:
    with pytest.raises(KafkaProtocolError, match="error code 15"):
        parse(_response(1, 15, []), 1)
    with pytest.raises(KafkaProtocolError, match="answers request 2, not 1"):
        parse(_response(2, 0, []), 1)
    whole = _response(1, 0, [("sluice-job-0-1", 12, "Ongoing")])
    with pytest.raises(KafkaProtocolError, match="more expected"):
        parse(whole[:-5], 1)
