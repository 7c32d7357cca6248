"""A TaskManager's launch settings on the contract's codec: written as the hand-written writer wrote them
(taken before the codec replaced it), and a malformed one never shows the secret or TLS key it holds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluice.transport.secret import JobSecret, LaunchSettingsError, TaskManagerLaunch, TlsMaterial

SECRET = JobSecret(bytes(range(32)))
TLS = TlsMaterial(
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n",
)
WITH_TLS_BEFORE = (
    '{"coordinator": "10.0.0.5:7000", '
    '"secret": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "maxFrameBytes": 4096, '
    '"tls": {"certificate": "-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n", '
    '"key": "-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----\\n"}}'
)
PLAIN_BEFORE = (
    '{"coordinator": "h:1", "secret": "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", '
    '"maxFrameBytes": 67108864, "tls": null}'
)


def test_launch_settings_are_written_and_read_as_before() -> None:
    with_tls = TaskManagerLaunch("10.0.0.5:7000", SECRET, 4096, TLS)
    assert with_tls.encode() == WITH_TLS_BEFORE
    assert TaskManagerLaunch.decode(WITH_TLS_BEFORE) == with_tls
    assert TaskManagerLaunch("h:1", SECRET).encode() == PLAIN_BEFORE
    assert TaskManagerLaunch.decode(PLAIN_BEFORE) == TaskManagerLaunch("h:1", SECRET)


@pytest.mark.parametrize(
    "settings",
    [
        {"secret": "ab" * 31 + "zz"},
        {"secret": "ab" * 8},
        {"secret": ["ab" * 32]},
        {"tls": ["-----BEGIN PRIVATE KEY----- abababab", "x"]},
        {"tls": {"certificate": "CERT", "key": ["-----BEGIN PRIVATE KEY----- abababab"]}},
    ],
)
def test_malformed_launch_settings_never_show_the_secret_or_key_they_hold(settings: dict[str, Any]) -> None:
    text = json.dumps({"coordinator": "h:1", "secret": "00" * 32, "maxFrameBytes": 1} | settings)
    with pytest.raises(LaunchSettingsError) as caught:
        TaskManagerLaunch.decode(text)
    assert "abab" not in str(caught.value) and "PRIVATE" not in str(caught.value)
