"""What a local barrier task's closure carries: the path of a private file, never the job's secret."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
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


def _ended_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    return int(done.stdout)


def test_a_launch_directory_whose_driver_was_killed_is_removed_by_the_next_host(tmp_path: Path) -> None:
    # A driver killed outright left its directory, and the job secret in it (seen after chaos runs that
    # SIGKILL coordinators).
    dead = tmp_path / f"sluice-launch-{_ended_pid()}-abcd1234"
    dead.mkdir(mode=0o700)
    (dead / "attempt-0-0000.json").write_text(launch().encode())
    alive = tmp_path / f"sluice-launch-{os.getpid()}-efgh5678"
    alive.mkdir(mode=0o700)
    older = tmp_path / "sluice-launch-05suws8w"  # an earlier version's name: no pid to judge by
    older.mkdir(mode=0o700)
    # Not directories of ours: a link to a directory elsewhere, and a file that only looks like one.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("kept")
    link = tmp_path / f"sluice-launch-{_ended_pid()}-link0000"
    link.symlink_to(elsewhere)
    lookalike = tmp_path / f"sluice-launch-{_ended_pid()}-file0000"
    lookalike.write_text("kept")

    settings = launch()
    files = LaunchFiles(tmp_path)  # kept: its directory goes when it does
    written = files.write(0, settings)

    assert not dead.exists()
    assert alive.is_dir() and older.is_dir()
    assert link.is_symlink() and (elsewhere / "keep").read_text() == "kept"
    assert lookalike.read_text() == "kept"
    # The new directory is named after this process, so that a later host can judge it the same way.
    assert Path(written).parent.name.startswith(f"sluice-launch-{os.getpid()}-")
    assert read_launch_file(written) == settings
