"""JSON values of Kafka records: orjson when it is installed (the `kafka` extra installs it), else json.

Decoding and encoding JSON was the largest cost of a Kafka job in W5 (bench/kafka.py): the standard
library takes about 3 us for a small object, orjson under 0.4 us. The two accept the same documents
here: whatever orjson refuses to read (NaN or Infinity literals) or would read inexactly (integers
beyond 64 bits) or cannot write (integers beyond 64 bits, types it does not know) goes to the json
module, which reads and writes it as before or raises as before. What orjson writes differs from
json.dumps only where json.dumps leaves JSON: NaN and Infinity become null instead of the `NaN` and
`Infinity` tokens JSON parsers refuse.
"""

from __future__ import annotations

import json
import types
from collections.abc import Sequence
from typing import Any, cast

_orjson: types.ModuleType | None
try:
    import orjson as _orjson
except ImportError:  # without the kafka extra: the standard library alone
    _orjson = None


#: orjson reads an integer beyond 64 bits as an inexact float; json reads it exactly. A run of 19
#: digits is where such integers start (u64 has 20): those documents are read by json. The run is
#: found by mapping every digit to "0" and searching for 19 of them, which costs a tenth of a regex.
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def _has_long_digits(value: bytes) -> bool:
    return _LONG_RUN in value.translate(_DIGITS_AS_ZERO)


def loads(value: bytes) -> Any:
    if _orjson is not None and not _has_long_digits(value):
        try:
            return _orjson.loads(value)
        except _orjson.JSONDecodeError:
            pass  # NaN or Infinity: json reads them, or raises as before
    return json.loads(value)


def dumps(value: Any) -> bytes:
    if _orjson is not None:
        try:
            # OPT_NON_STR_KEYS: json.dumps writes int, float, bool and None keys too.
            return bytes(_orjson.dumps(value, option=_orjson.OPT_NON_STR_KEYS))
        except TypeError:
            pass  # a type orjson does not know (json may, through a subclass) or a huge integer
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def decode_all(values: Sequence[bytes | None]) -> list[Any]:
    """JSON values of a batch of records; a record without a value (a tombstone) stays None."""
    if _orjson is None:
        return [None if v is None else loads(v) for v in values]
    try:
        # The common case, checked for long integers once per batch rather than once per record
        # (joining raises TypeError on a tombstone: such a batch takes the record by record path).
        long_digits = _has_long_digits(b" ".join(cast("Sequence[bytes]", values)))
    except TypeError:
        long_digits = True
    if long_digits:
        return [None if v is None else loads(v) for v in values]
    try:
        return list(map(_orjson.loads, values))
    except _orjson.JSONDecodeError:
        return [loads(cast(bytes, v)) for v in values]
