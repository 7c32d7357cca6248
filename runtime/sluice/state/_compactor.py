"""The compaction process: `python -m sluice.state._compactor`, started by `sluice.state.compaction`.

It reads `{"inputs": [{"uri": uri, "sha256": digest}, ...], "output": uri}` (the chain, full file
first) on stdin, checks each input against its digest as it reads it, writes the compacted file, and
prints `{"size": bytes, "sha256": digest, "peakRssBytes": bytes}`. A process of its own, not a
thread of the TaskManager: the merge is pickling and set arithmetic that hold the GIL, and the task's
thread, which lets go of the GIL at each LMDB call, got it back only after a switch interval each time
(records counted fell from ~200k/s to ~30k/s while a thread compacted 10M keys). It runs at a lower
priority than the TaskManager, whose records come first, and it dies with the TaskManager: one killed
(a lost pod's container, a chaos test, Spark killing its task) leaves no compaction writing into the
job's storage behind it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys

from sluice._fs import filesystem, make_dirs
from sluice.state.chain_files import Batched
from sluice.state.compaction import PARENT_VARIABLE, Source, compact
from sluice.state.stored_files import DigestingWriter, is_digest

_NICENESS = 10
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Asks the kernel for SIGKILL when the TaskManager thread that started this process ends, and
    exits if the TaskManager has already gone (it died between the fork and this call)."""
    parent = os.environ.get(PARENT_VARIABLE, "")
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent.isdigit() and os.getppid() != int(parent):
        sys.exit(3)


def main() -> int:
    _die_with_parent()
    request = json.loads(sys.stdin.read())
    inputs, output = request["inputs"], request["output"]
    sources = _sources(inputs)
    if sources is None or not isinstance(output, str):
        print(
            "the compactor takes {'inputs': [{'uri': uri, 'sha256': digest}, ...], 'output': uri}",
            file=sys.stderr,
        )
        return 2
    with contextlib.suppress(OSError):  # not allowed here: the same priority then
        os.nice(_NICENESS)
    fs, path = filesystem(output)
    make_dirs(fs, path.rsplit("/", 1)[0])
    with fs.open(path, "wb") as handle:
        digesting = DigestingWriter(handle)
        out = Batched(digesting)
        size = compact(sources, out)
        out.flush()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"size": size, "sha256": digesting.hexdigest(), "peakRssBytes": peak}))
    return 0


def _sources(inputs: object) -> list[Source] | None:
    if not isinstance(inputs, list):
        return None
    sources: list[Source] = []
    for entry in inputs:
        if not isinstance(entry, dict) or not isinstance(entry.get("uri"), str):
            return None
        digest = entry.get("sha256")
        if digest is not None and not is_digest(digest):
            return None
        sources.append((entry["uri"], digest))
    return sources


if __name__ == "__main__":
    sys.exit(main())
