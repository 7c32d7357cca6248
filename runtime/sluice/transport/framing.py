"""Length-prefixed frames: a 4-byte big-endian length, then the payload.

A receiver never allocates more than `max_bytes` for a frame: a larger length header ends the
connection before anything is read. A sender that would exceed the limit fails with a message naming
the setting, instead of the receiver silently dropping the connection.
"""

from __future__ import annotations

import asyncio
import struct

HEADER = struct.Struct(">I")


class FrameTooLarge(ConnectionError):
    """A frame longer than the configured maximum was announced or about to be sent."""


def frame(payload: bytes, max_bytes: int) -> bytes:
    if len(payload) > max_bytes:
        raise FrameTooLarge(
            f"a message of {len(payload):,} bytes is larger than the maximum frame size of "
            f"{max_bytes:,} bytes; emit smaller records or raise `sluice run --max-frame-size`"
        )
    return HEADER.pack(len(payload)) + payload


async def read_payload(reader: asyncio.StreamReader, max_bytes: int) -> bytes:
    (length,) = HEADER.unpack(await reader.readexactly(HEADER.size))
    if length > max_bytes:
        raise FrameTooLarge(
            f"the peer announced a frame of {length:,} bytes, over the limit of {max_bytes:,}"
        )
    return await reader.readexactly(length)
