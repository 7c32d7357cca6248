"""Small pieces shared by the runtime unit tests: a recording Output, operator set-up, checkpoint files,
a checkpoint coordinator of a two-subtask source and its acknowledgements."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice._states import CheckpointKind
from sluice.checkpoint.acknowledgement import AckedOperator, Acknowledgement
from sluice.checkpoint.coordinator import CheckpointConfig, CheckpointCoordinator
from sluice.checkpoint.metadata import CheckpointMetadata, OperatorEntry, SubtaskHandle
from sluice.checkpoint.snapshot import OperatorSnapshot
from sluice.checkpoint.state_key import StateKey
from sluice.checkpoint.storage import CheckpointStorage, read_metadata, write_metadata, write_state_file
from sluice.engine.context import Metrics, OperatorContext
from sluice.engine.operators.base import StreamOperator
from sluice.state.chain_files import KeyedFile
from sluice.state.keygroups import key_group_range
from sluice.state.stored_files import sha256
from sluice.transport.messages import ToTaskManager

from ._graphs import graph


@dataclass
class RecordingOutput:
    """An Output that keeps everything an operator emits, in order."""

    events: list[tuple[str, Any, Any]] = field(default_factory=list)
    side: dict[str, list[tuple[Any, int | None]]] = field(default_factory=dict)
    """Side-output records by tag, with their timestamps."""

    def emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        self.events.append(("records", list(values), None if timestamps is None else list(timestamps)))

    def emit_watermark(self, timestamp: int) -> None:
        self.events.append(("watermark", timestamp, None))

    def emit_idle(self, idle: bool) -> None:
        self.events.append(("idle", idle, None))

    def emit_side(self, tag: str, values: list[Any], timestamps: list[int] | None) -> None:
        stamps: list[int | None] = list(timestamps) if timestamps is not None else [None] * len(values)
        self.side.setdefault(tag, []).extend(zip(values, stamps, strict=True))

    @property
    def records(self) -> list[Any]:
        return [v for kind, values, _ in self.events if kind == "records" for v in values]

    @property
    def timestamped(self) -> list[tuple[Any, int | None]]:
        out: list[tuple[Any, int | None]] = []
        for kind, values, stamps in self.events:
            if kind == "records":
                out.extend(zip(values, stamps or [None] * len(values), strict=True))
        return out

    @property
    def watermarks(self) -> list[int]:
        return [ts for kind, ts, _ in self.events if kind == "watermark"]

    def clear(self) -> None:
        self.events.clear()


def start(
    op: StreamOperator,
    *,
    restored: Any = None,
    subtask: int = 0,
    parallelism: int = 1,
    max_parallelism: int = 128,
    attempt: int = 0,
    state_backend: str = "heap",
) -> tuple[RecordingOutput, OperatorContext]:
    """Runs the first steps of the operator lifecycle (setup, initialize_state, open) as a task would."""
    ctx = OperatorContext(
        operator_uid=op.uid,
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        attempt=attempt,
        metrics=Metrics(),
        keyed=op.is_keyed,
        job_id="0123456789abcdef",
        state_backend=state_backend,
    )
    out = RecordingOutput()
    op.setup(ctx, out)
    op.initialize_state(restored)
    op.open()
    return out, ctx


def write_checkpoint(
    directory: Path,
    uid: str,
    snapshots: dict[int, OperatorSnapshot | None],
    parallelism: int,
    max_parallelism: int = 128,
    keyed: bool = False,
    finished: tuple[int, ...] = (),
) -> CheckpointMetadata:
    """Writes one operator's state files and `_metadata` as a completed checkpoint has them; reads it back.

    `snapshots` maps subtask index -> its snapshot (running subtasks only); `finished` lists the subtasks
    that had finished, so they have no state in the checkpoint.
    """
    location = directory.as_uri()
    handles = []
    for index, snap in sorted(snapshots.items()):
        if snap is None or snap.is_empty():
            continue
        chain: tuple[KeyedFile, ...] = ()
        if snap.deferred is not None:
            # Files of a keyed snapshot, written as a savepoint's: beside `_metadata`, self-contained.
            write = snap.deferred.plan(1, savepoint=True)
            snap.deferred = None
            chain = tuple(write.write(location, f"{uid}-{index}").chain)
            write.release()
        name: str | None = None
        size, digest = 0, None
        if not snap.is_empty():
            name = f"{uid}-{index}.state"
            size, digest = write_state_file(location, name, pickle.dumps(snap, protocol=5))
        groups = key_group_range(index, max_parallelism, parallelism)
        handles.append(
            SubtaskHandle(
                index,
                name,
                size,
                key_groups=(groups.start, groups.stop - 1) if keyed else None,
                operator_state=bool(snap.lists or snap.unions or snap.broadcast),
                union=snap.uses_union_state(),
                keyed_files=chain,
                sha256=digest,
            )
        )
    fully = len(finished) == parallelism
    entry = OperatorEntry(
        uid,
        parallelism,
        max_parallelism,
        fully_finished=fully,
        finished_subtasks=() if fully else finished,
        subtasks=() if fully else tuple(handles),
    )
    metadata = CheckpointMetadata(1, "j", CheckpointKind.CHECKPOINT, 0, None, (entry,), version=1)
    write_metadata(location, metadata, TEST_KEY)
    return read_metadata(location, TEST_KEY)


def source_coordinator(tmp_path: Path, sent: list[ToTaskManager]) -> CheckpointCoordinator:
    """A checkpoint coordinator of one source vertex with two subtasks, checkpoints in `tmp_path/chk`,
    that records what it sends to TaskManagers in `sent`."""
    storage = CheckpointStorage(f"file://{tmp_path / 'chk'}", "job", TEST_KEY)
    config = CheckpointConfig(interval_s=None)
    return CheckpointCoordinator(
        graph([(["src"], 2)], []), storage, config, lambda m, _: sent.append(m), dict
    )


TEST_KEY = StateKey(b"test state key, 32 bytes or more")
"""The deployment key of the unit tests' checkpoints."""

SOURCE_STATE = b"0123456789"
"""What each subtask of `source_coordinator`'s source writes as its state file."""


def source_ack(checkpoint: int, subtask: int) -> Acknowledgement:
    """Subtask `subtask` of `source_coordinator`'s source acknowledges `checkpoint` with its state file."""
    state = AckedOperator(
        "src",
        finished=False,
        path=f"src-{subtask}.state",
        size=len(SOURCE_STATE),
        sha256=sha256(SOURCE_STATE),
    )
    return Acknowledgement(checkpoint, 0, subtask, (state,), end_of_data=False)


def acknowledge_all(coord: CheckpointCoordinator, checkpoint: int) -> None:
    """Both subtasks of `source_coordinator`'s source write their state file, as TaskManagers do, and
    acknowledge `checkpoint`."""
    location = coord.storage.checkpoint_location(checkpoint)
    for subtask in (0, 1):
        write_state_file(location, f"src-{subtask}.state", SOURCE_STATE)
        coord.on_ack(source_ack(checkpoint, subtask))
