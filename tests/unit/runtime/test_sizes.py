"""`--max-frame-size` and other sizes on the command line."""

from __future__ import annotations

import pytest

from sluice._sizes import parse_size


@pytest.mark.parametrize(
    ("text", "size"),
    [("65536", 65536), ("512KiB", 512 << 10), ("64MiB", 64 << 20), ("1GiB", 1 << 30), ("2 mb", 2 << 20)],
)
def test_sizes_in_binary_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "64 MiBs", "-1", "1.5MiB", "0", "lots"])
def test_what_is_not_a_size_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(text)
