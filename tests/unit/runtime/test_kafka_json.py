"""JSON values of Kafka records (connectors/kafka/_json.py): orjson reads and writes what json would."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from sluice.connectors.kafka import _json
from sluice.connectors.kafka._common import decode, encode, encode_key

SAMPLES: list[Any] = [
    {"key": 1234, "ts_ms": 1_700_000_001_234, "v": 57},
    {"nested": [1, 2.5, "x", None, True, {"a": []}], "unicode": "żółw ✓"},
    [],
    "text",
    -0.1,
    10**18,
]


@pytest.mark.parametrize("value", SAMPLES)
def test_reads_and_writes_what_json_does(value: Any) -> None:
    written = json.dumps(value, separators=(",", ":")).encode()
    assert _json.loads(written) == json.loads(written)
    assert json.loads(_json.dumps(value)) == value
    assert decode(encode(value, "json"), "json") == value


def test_the_fast_path_is_in_use() -> None:
    # The speed of W5 depends on it; the kafka extra installs it.
    assert _json._orjson is not None


def test_documents_orjson_refuses_are_read_as_json_reads_them() -> None:
    assert math.isnan(_json.loads(b'{"x": NaN}')["x"])
    assert _json.loads(b"[Infinity]") == [math.inf]
    assert _json.loads(str(10**30).encode()) == 10**30


def test_malformed_json_raises_as_before() -> None:
    with pytest.raises(json.JSONDecodeError):
        _json.loads(b'{"x": ')


def test_values_orjson_cannot_write_are_written_as_json_writes_them() -> None:
    assert _json.dumps({"big": 10**30}) == b'{"big":1000000000000000000000000000000}'
    assert json.loads(_json.dumps({1: "a", None: "b"})) == json.loads(json.dumps({1: "a", None: "b"}))
    with pytest.raises(TypeError):
        _json.dumps({1, 2})  # neither knows a set: the error json.dumps gives


def test_a_batch_keeps_tombstones() -> None:
    assert _json.decode_all([b"1", None, b'"a"']) == [1, None, "a"]


def test_int_keys_are_written_as_json_writes_them() -> None:
    for key in (0, -5, 10**20, True, 2.5, (1, "a")):
        assert encode_key(key) == json.dumps(key, separators=(",", ":"), sort_keys=True).encode()


def test_a_batch_reads_each_record_as_one_record_would_be_read() -> None:
    plain = [b'{"v": 1}', b'{"v": 2}']
    assert _json.decode_all(plain) == [{"v": 1}, {"v": 2}]
    # One record of the batch with a long integer or a NaN: every record is still read exactly.
    long_int = [b'{"v": 1}', str(10**30).encode()]
    assert _json.decode_all(long_int) == [{"v": 1}, 10**30]
    with_nan = [b"[NaN]", b"2"]
    values = _json.decode_all(with_nan)
    assert math.isnan(values[0][0]) and values[1] == 2
    # Digits split over two records do not make a long integer of either.
    assert _json.decode_all([b"1234567890", b"123456789"]) == [1234567890, 123456789]
