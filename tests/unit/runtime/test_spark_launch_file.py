"""What a local barrier task's closure carries: the path of a private file, never the job's secret."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import cloudpickle
import pytest

from sluice.hosts.spark._host import SparkHost
from sluice.hosts.spark._launch_file import LaunchFiles, read_launch_file
from sluice.hosts.spark._sealed_launch import seal, unseal
from sluice.transport.secret import JobSecret, LaunchSettingsError, TaskManagerLaunch, TlsMaterial

KEY_PEM = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0IGtleSBtYXRlcmlhbA==\n-----END PRIVATE KEY-----\n"


def launch() -> TaskManagerLaunch:
    return TaskManagerLaunch("127.0.0.1:4000", JobSecret.generate(), tls=TlsMaterial("CERT", KEY_PEM))


class FakeContext:
    def __init__(self, master: str, conf: dict[str, str] | None = None) -> None:
        self.master = master
        self.conf = conf or {}

    def getConf(self) -> dict[str, str]:  # noqa: N802 (PySpark's name)
        return self.conf


def kubernetes_host(secret: Path | None) -> SparkHost:
    conf = {} if secret is None else {"spark.authenticate.secret.file": str(secret)}
    return SparkHost(FakeContext("k8s://https://10.0.0.1:443", conf))


def test_the_local_closure_holds_no_secret_and_the_file_is_private() -> None:
    settings = launch()
    host = SparkHost(FakeContext("local[2]"))
    body, launch_file = host._task_body(settings, attempt=1)
    assert launch_file == body.args[0]
    shipped = cloudpickle.dumps(body)
    assert settings.secret.key.hex().encode() not in shipped and settings.secret.key not in shipped
    assert b"c2VjcmV0IGtleSBtYXRlcmlhbA" not in shipped, "the CA's private key stays out of the closure"
    path = Path(body.args[0])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_launch_file(str(path)) == settings


def test_a_kubernetes_closure_is_sealed_under_the_mounted_spark_secret(tmp_path: Path) -> None:
    # Executors in other pods cannot read a file of the driver's; each has the Spark secret mounted.
    secret = tmp_path / "spark-secret"
    secret.write_bytes(b"the job's Spark secret\n")
    settings = launch()
    body, launch_file = kubernetes_host(secret)._task_body(settings, 1)
    assert launch_file is None
    shipped = cloudpickle.dumps(body)
    assert settings.secret.key.hex().encode() not in shipped and settings.secret.key not in shipped
    assert b"c2VjcmV0IGtleSBtYXRlcmlhbA" not in shipped
    executor_file, sealed = body.args[0], body.args[1]
    assert executor_file == str(secret)
    assert unseal(sealed, executor_file) == settings


def test_sealed_settings_do_not_open_with_another_secret(tmp_path: Path) -> None:
    (tmp_path / "driver").write_bytes(b"one secret")
    (tmp_path / "other").write_bytes(b"another secret")
    sealed = seal(launch(), str(tmp_path / "driver"))
    with pytest.raises(LaunchSettingsError, match="were given different Spark secrets"):
        unseal(sealed, str(tmp_path / "other"))
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(LaunchSettingsError, match="do not open"):
        unseal(tampered, str(tmp_path / "driver"))
    with pytest.raises(LaunchSettingsError, match=r"cannot read the Spark secret file .*missing"):
        unseal(sealed, str(tmp_path / "missing"))


def test_without_a_spark_secret_file_the_closure_carries_the_settings() -> None:
    # Spark drew its own secret (a k8s:// master run by hand): its authenticated channel it is.
    settings = launch()
    body, _ = kubernetes_host(None)._task_body(settings, 1)
    assert TaskManagerLaunch.decode(body.args[0]) == settings


def test_a_launch_file_once_removed_is_refused_with_why() -> None:
    files = LaunchFiles()
    first, again = files.write(3, launch()), files.write(3, launch())
    assert first != again, "a stage of the same attempt still winding down keeps its own file"
    os.unlink(first)
    with pytest.raises(LaunchSettingsError, match="the attempt that wrote them has ended"):
        read_launch_file(first)


def test_a_launch_file_open_to_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "launch.json"
    path.write_text(launch().encode())
    os.chmod(path, 0o644)
    with pytest.raises(LaunchSettingsError, match=r"not private to this user .* mode 0644"):
        read_launch_file(str(path))


def test_a_launch_file_that_is_a_link_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text(launch().encode())
    os.chmod(real, 0o600)
    (tmp_path / "link.json").symlink_to(real)
    with pytest.raises(LaunchSettingsError, match="is not a plain file"):
        read_launch_file(str(tmp_path / "link.json"))
