"""Compaction of a chain of keyed state files into one full file, beside checkpointing.

A chain grows by a delta per checkpoint and must be cut back now and then, or restoring reads more and
more. Writing a full snapshot inside a checkpoint did that, but at millions of keys the full write took
seconds, and no checkpoint could start meanwhile. Here the full file is made apart from any checkpoint,
by a process of its own (`sluice.state._compactor`, watched by a thread), from the chain's files alone
(Flink's changelog backend does the same with its "materialization"): it reads neither the backend nor
its frozen views, so it pins no LMDB read transaction (whose pinned pages grew the store's file) and
holds no copy-on-write generation of the heap, and it takes nothing from the task's thread's GIL.

The merge reads the chain newest file first. A key met once is settled: its newest entry is written (or,
if it was removed, nothing), and older files' entries for it are skipped. So it holds the keys of the
deltas in memory, never their values and never the keys of the full file, which it reads last.

How a compaction lives, in the order of its steps (`sluice.state.snapshots.ChangeLog` drives it):

1. planned by a checkpoint `c` whose confirmed chain is due for it (too many deltas, or deltas larger
   than its full file); the file's name carries `c`, so while `c` is pending the coordinator keeps it;
2. started by checkpoint `c`'s write, once its own delta is written;
3. named in the `protectedFiles` of every acknowledgement from then on, so that every checkpoint the
   coordinator retains names it and `collect_shared` leaves the unfinished file alone;
4. adopted by the first checkpoint planned after it finished whose confirmed chain still starts with
   the compacted files: that checkpoint's chain is the compacted file, then the deltas written since;
5. done once a checkpoint whose chain starts with it completes; from then on the chain refers to it.

A compaction that fails, or whose chain was replaced meanwhile (a full snapshot written after all), is
dropped: no acknowledgement names it any more and the coordinator deletes its file like any other.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable

from sluice._fs import filesystem, join
from sluice.state.chain_files import Batched, KeyedFile, dump, file_uri, header, read_frames
from sluice_contract.checkpoints import shared_location

log = logging.getLogger(__name__)
_POLL_S = 0.2
PARENT_VARIABLE = "SLUICE_COMPACTOR_PARENT"
"""The TaskManager's pid, in the compaction process's environment: it exits if that is gone."""


class Cancelled(Exception):
    """The compaction's operator closed."""


Source = tuple[str, str | None]
"""A chain file to compact: its URI and the digest it was written with."""


def compact(sources: list[Source], out: Batched, cancelled: Callable[[], bool] = lambda: False) -> int:
    """Writes the state the chain `sources` (full file first) restores as one full file; returns its
    size. Each file is checked against its digest before it is read."""
    settled: dict[str, set[object]] = {}
    kinds: dict[str, str] = {}
    size = dump(out, header(True))
    for position in range(len(sources) - 1, -1, -1):
        oldest = position == 0  # the full file: nothing older to settle keys for
        for name, kind, entries, removed in read_frames(*sources[position]):
            if cancelled():
                raise Cancelled
            known = settled.setdefault(name, set())
            if entries:
                fresh = entries.keys() - known if known else None
                kept = (
                    entries if fresh is None or len(fresh) == len(entries) else {k: entries[k] for k in fresh}
                )
                if kept:
                    size += dump(out, (name, kinds.setdefault(name, kind), kept, []))
                if not oldest:
                    known.update(entries.keys())
            if removed and not oldest:
                known.update(removed)
    return size


class Compaction:
    """One compaction of a subtask's chain `source`, planned by checkpoint `checkpoint_id`."""

    def __init__(self, source: list[KeyedFile], checkpoint_id: int) -> None:
        self.source = source
        self.checkpoint_id = checkpoint_id
        self._token = uuid.uuid4().hex[:12]
        self.result: KeyedFile | None = None
        self.peak_rss_bytes = 0
        """The compaction process's peak resident set, once it finished."""
        self.child: subprocess.Popen[bytes] | None = None
        self.started = False
        self._done = threading.Event()
        self._cancelled = False

    def file_name(self, stem: str) -> str:
        """Its file's name: fixed when planned, so each acknowledgement can name it before it exists."""
        return f"{stem}-{self.checkpoint_id}-{self._token}.kv"

    @property
    def finished(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def start(self, location: str, stem: str) -> None:
        """Starts the compaction process and a thread that waits for it; `location` is the planning
        checkpoint's."""
        if self.started:
            return
        self.started = True
        thread = threading.Thread(
            target=self._run,
            args=(location, stem),
            name=f"compaction-{stem}-{self.checkpoint_id}",
            daemon=True,
        )
        thread.start()

    def cancel(self, wait_s: float = 0.0) -> None:
        """Stops the compaction: its process is killed at once and what it wrote is deleted. With
        `wait_s`, waits up to that long for both, so that nothing of it outlives its operator's close
        (a compaction process left running wrote its file into the job's storage after the job ended)."""
        self._cancelled = True
        if not self.started:
            self._done.set()
            return
        child = self.child
        if child is not None and child.poll() is None:
            with contextlib.suppress(OSError):  # it ended meanwhile
                child.kill()
        if wait_s > 0:
            self._done.wait(wait_s)

    def _run(self, location: str, stem: str) -> None:
        name = self.file_name(stem)
        output = join(shared_location(location), name)
        try:
            sources = [(file_uri(location, ref), ref.sha256) for ref in self.source]
            self.result = self._in_child(sources, output, name)
        except Exception as err:
            # The chain stays as it is and grows until a later compaction or a full snapshot cuts it:
            # nothing is lost, restoring only reads more.
            log.warning(
                "compacting %d keyed state files of %s failed: %s: %s",
                len(self.source),
                stem,
                type(err).__name__,
                err,
            )
        finally:
            self._done.set()

    def _in_child(self, inputs: list[Source], output: str, name: str) -> KeyedFile | None:
        """Runs `sluice.state._compactor` and waits for it; kills it when cancelled."""
        child = subprocess.Popen(
            [sys.executable, "-m", "sluice.state._compactor"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_child_environment(),
        )
        self.child = child
        chain = [{"uri": uri, "sha256": digest} for uri, digest in inputs]
        request: bytes | None = json.dumps({"inputs": chain, "output": output}).encode()
        try:
            while not self._cancelled:  # cancel() may have come before `child` was set: kill it here
                try:
                    # Called again after a timeout, communicate() goes on where it was.
                    answer, problem = child.communicate(request, timeout=_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    request = None
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        if self._cancelled:
            # Killed by cancel(), or finished as it came: either way no checkpoint will adopt it.
            _remove(output)
            return None
        if child.returncode != 0:
            _remove(output)
            last = problem.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"the compaction process exited with {child.returncode}: {last[0]}")
        figures = json.loads(answer)
        self.peak_rss_bytes = int(figures["peakRssBytes"])
        return KeyedFile(name, int(figures["size"]), full=True, shared=True, sha256=str(figures["sha256"]))


def _child_environment() -> dict[str, str]:
    """The TaskManager's environment, with the directory sluice was imported from on the path (it may
    have come from a zip Spark shipped, not from an installed package)."""
    env = dict(os.environ)
    env[PARENT_VARIABLE] = str(os.getpid())
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # above sluice/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _remove(uri: str) -> None:
    fs, path = filesystem(uri)
    with contextlib.suppress(OSError):
        fs.rm(path)
