"""The S3 fixture gives a real S3-protocol server that s3fs reaches, by options or by environment alone."""

from __future__ import annotations

import os
import subprocess
import sys

import fsspec
import pytest

from testkit.s3 import S3Server

pytestmark = pytest.mark.s3

MIB = 1024 * 1024


def test_write_list_read(s3_server: S3Server, s3_bucket: str) -> None:
    fs = s3_server.filesystem()
    fs.pipe(f"{s3_bucket}/chk-1/_metadata", b'{"checkpointId": 1}')
    fs.pipe(f"{s3_bucket}/chk-1/state-0", b"state")

    assert sorted(fs.ls(f"{s3_bucket}/chk-1", detail=False)) == [
        f"{s3_bucket[5:]}/chk-1/_metadata",
        f"{s3_bucket[5:]}/chk-1/state-0",
    ]
    assert fs.cat(f"{s3_bucket}/chk-1/_metadata") == b'{"checkpointId": 1}'


def test_rename_is_copy_then_delete(s3_server: S3Server, s3_bucket: str) -> None:
    fs = s3_server.filesystem()
    fs.pipe(f"{s3_bucket}/out/.part-0.inprogress", b"line 1\nline 2\n")

    fs.mv(f"{s3_bucket}/out/.part-0.inprogress", f"{s3_bucket}/out/part-0")

    assert not fs.exists(f"{s3_bucket}/out/.part-0.inprogress")
    assert fs.cat(f"{s3_bucket}/out/part-0") == b"line 1\nline 2\n"


def test_object_is_visible_only_after_its_write_completes(s3_server: S3Server, s3_bucket: str) -> None:
    writer_fs, reader_fs = s3_server.filesystem(), s3_server.filesystem()
    path = f"{s3_bucket}/big-object"
    # Larger than one 5 MiB block, so s3fs uploads a multipart part before close() completes the upload.
    with writer_fs.open(path, "wb", block_size=5 * MIB) as f:
        f.write(b"a" * (6 * MIB))
        f.flush()
        assert f.parts, "a multipart part should have been uploaded already"
        assert not reader_fs.exists(path)
    reader_fs.invalidate_cache()
    assert reader_fs.exists(path)
    assert reader_fs.size(path) == 6 * MIB


def test_plain_fsspec_reaches_the_server_through_the_environment(s3_server: S3Server, s3_bucket: str) -> None:
    # No storage options at all: the endpoint and credentials come from s3_bucket's environment,
    # which is how the runtime (and its child processes) reach the server.
    with fsspec.open(f"{s3_bucket}/from-env.txt", "w", skip_instance_cache=True) as f:
        f.write("hello")
    assert s3_server.filesystem().cat(f"{s3_bucket}/from-env.txt") == b"hello"
    assert os.environ["AWS_ENDPOINT_URL_S3"] == s3_server.endpoint_url


def test_a_child_process_inherits_the_endpoint(s3_server: S3Server, s3_bucket: str) -> None:
    code = "import sys, fsspec\nwith fsspec.open(sys.argv[1], 'wb') as f:\n    f.write(b'from a child')\n"
    subprocess.run([sys.executable, "-c", code, f"{s3_bucket}/child.bin"], check=True, timeout=60)
    assert s3_server.filesystem().cat(f"{s3_bucket}/child.bin") == b"from a child"


def test_each_test_gets_its_own_empty_bucket(s3_server: S3Server, s3_bucket: str) -> None:
    fs = s3_server.filesystem()
    assert fs.ls(s3_bucket, detail=False) == []
    fs.pipe(f"{s3_bucket}/only-here", b"x")
    other = s3_server.create_bucket()
    assert other != s3_bucket
    assert fs.ls(other, detail=False) == []
