"""What a local barrier task's closure carries: the path of a private file, never the job's secret."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import SimpleNamespace

import cloudpickle
import pytest

from sluice.hosts.spark._host import SparkHost
from sluice.hosts.spark._launch_file import LaunchFiles, read_launch_file
from sluice.transport.secret import JobSecret, LaunchSettingsError, TaskManagerLaunch, TlsMaterial

KEY_PEM = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0IGtleSBtYXRlcmlhbA==\n-----END PRIVATE KEY-----\n"


def launch() -> TaskManagerLaunch:
    return TaskManagerLaunch("127.0.0.1:4000", JobSecret.generate(), tls=TlsMaterial("CERT", KEY_PEM))


def test_the_local_closure_holds_no_secret_and_the_file_is_private() -> None:
    settings = launch()
    host = SparkHost(SimpleNamespace(master="local[2]"))
    body = host._task_body(settings, attempt=1)
    shipped = cloudpickle.dumps(body)
    assert settings.secret.key.hex().encode() not in shipped and settings.secret.key not in shipped
    assert b"c2VjcmV0IGtleSBtYXRlcmlhbA" not in shipped, "the CA's private key stays out of the closure"
    path = Path(body.args[0])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_launch_file(str(path)) == settings


def test_a_kubernetes_closure_still_carries_the_settings() -> None:
    # Executors in other pods cannot read a file of the driver's: Spark's authenticated channel it is.
    settings = launch()
    body = SparkHost(SimpleNamespace(master="k8s://https://10.0.0.1:443"))._task_body(settings, 1)
    assert TaskManagerLaunch.from_json(body.args[0]) == settings


def test_an_attempts_file_is_gone_once_removed() -> None:
    files = LaunchFiles()
    path = files.write(3, launch())
    files.remove(path)
    with pytest.raises(LaunchSettingsError, match="the attempt that wrote them has ended"):
        read_launch_file(path)


def test_a_launch_file_open_to_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "launch.json"
    path.write_text(launch().to_json())
    os.chmod(path, 0o644)
    with pytest.raises(LaunchSettingsError, match=r"not private to this user .* mode 0644"):
        read_launch_file(str(path))


def test_a_launch_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text(launch().to_json())
    os.chmod(real, 0o600)
    (tmp_path / "link.json").symlink_to(real)
    with pytest.raises(LaunchSettingsError, match="is not a plain file"):
        read_launch_file(str(tmp_path / "link.json"))
