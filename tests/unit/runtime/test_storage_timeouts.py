"""Storage calls are bounded: an object store that stops answering fails the call, it does not hang it.

The next attempt of a job waits for every `_metadata` write to land or fail (a write that may still land
must not race the choice of restore point), so a write that could hang forever would hold the job.
"""

from __future__ import annotations

import math

from sluice._fs import filesystem


def test_the_runtimes_s3_client_gives_up_on_a_silent_store() -> None:
    fs, path = filesystem("s3://a-bucket/checkpoints/job/chk-1/_metadata")
    assert path == "a-bucket/checkpoints/job/chk-1/_metadata"
    config = fs.config_kwargs
    for timeout in ("connect_timeout", "read_timeout"):
        assert 0 < config[timeout] < math.inf, config
    attempts = config["retries"]["max_attempts"]
    assert 0 < attempts < math.inf and 0 < fs.retries < math.inf
