"""The compaction process: `python -m sluice.state._compactor`, started by `sluice.state.compaction`.

It reads `{"inputs": [uri, ...], "output": uri}` (the chain, full file first) on stdin, writes the
compacted file, and prints `{"size": bytes, "peakRssBytes": bytes}`. A process of its own, not a
thread of the TaskManager: the merge is pickling and set arithmetic that hold the GIL, and the task's
thread, which lets go of the GIL at each LMDB call, got it back only after a switch interval each time
(records counted fell from ~200k/s to ~30k/s while a thread compacted 10M keys). It runs at a lower
priority than the TaskManager, whose records come first.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys

from sluice._fs import filesystem, make_dirs
from sluice.state.chain_files import Batched
from sluice.state.compaction import compact

_NICENESS = 10


def main() -> int:
    request = json.loads(sys.stdin.read())
    inputs, output = request["inputs"], request["output"]
    if not (isinstance(inputs, list) and all(isinstance(u, str) for u in inputs) and isinstance(output, str)):
        print("the compactor takes {'inputs': [uri, ...], 'output': uri}", file=sys.stderr)
        return 2
    with contextlib.suppress(OSError):  # not allowed here: the same priority then
        os.nice(_NICENESS)
    fs, path = filesystem(output)
    make_dirs(fs, path.rsplit("/", 1)[0])
    with fs.open(path, "wb") as handle:
        out = Batched(handle)
        size = compact(inputs, out)
        out.flush()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(json.dumps({"size": size, "peakRssBytes": peak}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
