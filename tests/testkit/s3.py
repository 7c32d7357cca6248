"""A real S3-protocol server for tests: moto's server in its own process on a loopback port.

How clients find it. botocore (and so aiobotocore and s3fs) reads the endpoint from the environment
variable ``AWS_ENDPOINT_URL_S3`` (or ``AWS_ENDPOINT_URL``) whenever no endpoint is passed in code, so the
runtime needs no S3-specific setting: ``fsspec.open("s3://bucket/key")`` reaches this server once
``S3Server.env`` is in the environment. ``s3_bucket`` puts it there for the duration of a test (child
processes inherit it); code that prefers explicit options can pass ``S3Server.storage_options`` to fsspec.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import s3fs

from testkit.ports import free_loopback_port

ACCESS_KEY = "sluice-test"
SECRET_KEY = "sluice-test-secret"
REGION = "us-east-1"


def client_options(endpoint_url: str) -> dict[str, Any]:
    """Options for ``fsspec.filesystem("s3", **options)`` / ``s3fs.S3FileSystem(**options)``."""
    return {
        "key": ACCESS_KEY,
        "secret": SECRET_KEY,
        # No region_name: s3fs would send it as the bucket's LocationConstraint, which S3 rejects for
        # us-east-1; the client's default region is us-east-1 anyway.
        "client_kwargs": {"endpoint_url": endpoint_url},
    }


def client_env(endpoint_url: str) -> dict[str, str]:
    """Environment that points any botocore-based client (s3fs, boto3, the AWS CLI) at `endpoint_url`."""
    return {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL_S3": endpoint_url,
        "AWS_ENDPOINT_URL": endpoint_url,
    }


@dataclass
class S3Server:
    """A running moto server. All buckets live in its memory and vanish when it stops."""

    port: int
    log_file: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def storage_options(self) -> dict[str, Any]:
        """Options for ``fsspec.filesystem("s3", **options)`` / ``s3fs.S3FileSystem(**options)``."""
        return client_options(self.endpoint_url)

    @property
    def env(self) -> dict[str, str]:
        """Environment that points any botocore-based client (s3fs, boto3, the AWS CLI) at this server."""
        return client_env(self.endpoint_url)

    def filesystem(self) -> s3fs.S3FileSystem:
        """A new, uncached s3fs client for this server (never shares state with the code under test)."""
        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh random name when none is given) and return its ``s3://`` URI."""
        name = name or f"test-{uuid.uuid4().hex[:16]}"
        self.filesystem().mkdir(name)
        return f"s3://{name}"

    # --- lifecycle -----------------------------------------------------------------------------------

    def start(self, timeout_s: float = 120.0) -> None:
        # Generous: importing moto takes over 30 s on a loaded 2-core machine (seen with three
        # pytest-xdist workers starting their services at once). A server that exits fails at once.
        with self.log_file.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "--host", "127.0.0.1", "--port", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.process.returncode}:\n{self._log()}")
            try:
                with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=1):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"moto server did not answer on {self.endpoint_url} in {timeout_s}s:\n{self._log()}"
        )

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _log(self) -> str:
        return self.log_file.read_text(errors="replace")[-4000:] if self.log_file.exists() else ""


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One moto server process for the whole test session, stopped at the end."""
    tmp = Path(tempfile.mkdtemp(prefix="sluice-s3-"))
    server = S3Server(port=free_loopback_port(), log_file=tmp / "moto.log")
    try:
        try:
            server.start()
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
        yield server
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket for one test, as ``s3://name``; the test's environment points S3 clients at the server.

    Buckets are not deleted afterwards: the server keeps them in memory and is discarded with the session.
    """
    for key, value in s3_server.env.items():
        monkeypatch.setenv(key, value)
    # A developer's own AWS profile must not redirect or re-credential the test clients.
    for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    return s3_server.create_bucket()
