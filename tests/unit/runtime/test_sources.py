"""Sources: how splits cover the input, how they are assigned, and exact continuation after a restore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sluice.checkpoint.restore import restored_share
from sluice.checkpoint.snapshot import RestoredState
from sluice.connectors import FileSource, GeneratorSource, SequenceSource, Source
from sluice.engine.operators.source import SourceOperator

from ._support import RecordingOutput, start, write_checkpoint


def read_split(source: Source[Any], split: Any, batch: int = 7) -> list[Any]:
    reader = source.open_split(split)
    out: list[Any] = []
    while (records := reader.read(batch)) is not None:
        out.extend(records)
    reader.close()
    return out


def drain(op: SourceOperator, batch: int = 5, limit: int | None = None) -> list[Any]:
    """Runs the source operator like its task does, up to `limit` records; returns what it emitted."""
    out = op.output
    assert isinstance(out, RecordingOutput)
    before = len(out.records)
    while limit is None or len(out.records) - before < limit:
        left = batch if limit is None else min(batch, limit - (len(out.records) - before))
        if op.emit_next(left) < 0:
            break
    return out.records[before:]


# -- SequenceSource -----------------------------------------------------------------------------------


@given(
    start_at=st.integers(min_value=-1000, max_value=1000),
    length=st.integers(min_value=0, max_value=500),
    splits=st.integers(min_value=1, max_value=20),
)
def test_sequence_splits_cover_the_range_exactly_and_contiguously(
    start_at: int, length: int, splits: int
) -> None:
    source = SequenceSource(start_at, start_at + length, splits=splits)
    parts = [read_split(source, s) for s in source.splits()]
    assert len(parts) == splits
    assert [i for part in parts for i in part] == list(range(start_at, start_at + length))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize(("start_at", "end", "splits", "message"), [(5, 4, 1, "end"), (0, 4, 0, "splits")])
def test_sequence_bad_arguments(start_at: int, end: int, splits: int, message: str) -> None:
    with pytest.raises(ValueError, match=f"SequenceSource: {message}"):
        SequenceSource(start_at, end, splits=splits)


# -- SourceOperator -----------------------------------------------------------------------------------


def test_split_j_goes_to_subtask_j_modulo_parallelism() -> None:
    source = SequenceSource(0, 70, splits=7)  # split k is [10k, 10k + 10)
    for parallelism in (1, 2, 3, 7, 9):
        emitted = []
        for subtask in range(parallelism):
            op = SourceOperator("src", source)
            start(op, subtask=subtask, parallelism=parallelism)
            records = drain(op)
            assert {i // 10 % parallelism for i in records} <= {subtask}
            assert sorted(records) == [i for i in range(70) if (i // 10) % parallelism == subtask]
            emitted.extend(records)
        assert sorted(emitted) == list(range(70))


@pytest.mark.parametrize("stop_after", [0, 1, 9, 10, 11, 33, 49, 50])
def test_snapshot_and_restore_continue_exactly(stop_after: int) -> None:
    source = SequenceSource(0, 50, splits=5)
    op = SourceOperator("src", source)
    start(op)
    first = drain(op, batch=3, limit=stop_after)
    snapshot = op.snapshot_state(1)
    op.close()
    again = SourceOperator("src", source)
    restored = None if snapshot is None else RestoredState(lists=dict(snapshot.lists))
    start(again, restored=restored)
    rest = drain(again, batch=4) if snapshot is not None else []
    assert first + rest == list(range(50))


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 2), (2, 1), (1, 4)])
def test_restore_at_another_parallelism_neither_skips_nor_repeats(tmp_path: Path, old: int, new: int) -> None:
    source = SequenceSource(0, 120, splits=6)
    emitted: list[int] = []
    snapshots = {}
    for subtask in range(old):
        op = SourceOperator("src", source)
        start(op, subtask=subtask, parallelism=old)
        emitted.extend(drain(op, batch=4, limit=12 + 5 * subtask))
        snapshots[subtask] = op.snapshot_state(1)
    metadata = write_checkpoint(tmp_path, "src", snapshots, old)
    for subtask in range(new):
        share = restored_share(metadata, "src", subtask, new, 128)
        assert isinstance(share, RestoredState)
        op = SourceOperator("src", source)
        start(op, restored=share, subtask=subtask, parallelism=new)
        emitted.extend(drain(op, batch=6))
    assert sorted(emitted) == list(range(120))


# -- GeneratorSource ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("splits", "count"), [(1, 10), (3, 10), (4, 0), (5, 3), (7, 100)])
def test_generator_split_s_covers_i_mod_splits_below_count(splits: int, count: int) -> None:
    source = GeneratorSource(lambda i: ("event", i), splits=splits, count=count)
    assert source.bounded
    for split in source.splits():
        records = read_split(source, split, batch=4)
        assert records == [("event", i) for i in range(count) if i % splits == split.split_id]


def test_unbounded_generator_continues_from_its_position() -> None:
    source = GeneratorSource(lambda i: i * i, splits=2)
    assert not source.bounded
    reader = source.open_split(source.splits()[1])
    assert reader.read(3) == [1, 9, 25]
    position = reader.position()
    resumed = source.open_split(position)
    assert resumed.read(2) == [49, 81]
    assert reader.read(2) == [49, 81]


def test_generator_through_snapshot_and_restore() -> None:
    source = GeneratorSource(lambda i: i, splits=3, count=40)
    op = SourceOperator("gen", source)
    start(op)
    first = drain(op, batch=4, limit=17)
    snapshot = op.snapshot_state(1)
    assert snapshot is not None
    again = SourceOperator("gen", source)
    start(again, restored=RestoredState(lists=dict(snapshot.lists)))
    assert len(first) == 17
    assert sorted(first + drain(again, batch=5)) == list(range(40))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"splits": 0}, "splits must be at least 1"),
        ({"rate": 0}, "rate must be positive"),
        ({"count": -1}, "count"),
    ],
)
def test_generator_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"GeneratorSource: {message}"):
        GeneratorSource(lambda i: i, **kwargs)


def test_generator_rate_is_reported_for_throttling() -> None:
    assert GeneratorSource(lambda i: i, rate=500.0).records_per_second() == 500.0
    assert GeneratorSource(lambda i: i).records_per_second() is None


# -- FileSource ---------------------------------------------------------------------------------------


def write_files(tmp_path: Path) -> dict[str, list[str]]:
    contents = {
        "a.txt": [f"alpha {i}" for i in range(25)],
        "b.txt": ["ünïcode ✓", "", "  spaced  ", "last line without newline"],
        "c.txt": [f"crlf {i}" for i in range(3)],
    }
    (tmp_path / "a.txt").write_text("\n".join(contents["a.txt"]) + "\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("\n".join(contents["b.txt"]), encoding="utf-8")
    (tmp_path / "c.txt").write_bytes(b"".join(f"{line}\r\n".encode() for line in contents["c.txt"]))
    (tmp_path / "skip.csv").write_text("not matched\n")
    return contents


def test_file_source_one_split_per_matching_file_in_name_order(tmp_path: Path) -> None:
    contents = write_files(tmp_path)
    source = FileSource(str(tmp_path / "*.txt"))
    splits = source.splits()
    assert [Path(s.uri.removeprefix("file://")).name for s in splits] == ["a.txt", "b.txt", "c.txt"]
    assert all(s.offset == 0 for s in splits)
    assert [read_split(source, s) for s in splits] == [
        contents["a.txt"],
        contents["b.txt"],
        contents["c.txt"],
    ]


def test_file_source_single_file_and_uri(tmp_path: Path) -> None:
    contents = write_files(tmp_path)
    source = FileSource((tmp_path / "b.txt").as_uri())
    (split,) = source.splits()
    assert read_split(source, split) == contents["b.txt"]


def test_file_source_continues_at_the_checkpointed_byte_offset(tmp_path: Path) -> None:
    contents = write_files(tmp_path)
    source = FileSource(str(tmp_path / "*.txt"))
    expected = contents["a.txt"] + contents["b.txt"] + contents["c.txt"]
    for stop_after in (1, 10, 25, 26, 28, 30):
        op = SourceOperator("files", source)
        start(op)
        first = drain(op, batch=4, limit=stop_after)
        snapshot = op.snapshot_state(1)
        op.close()
        assert snapshot is not None
        again = SourceOperator("files", source)
        start(again, restored=RestoredState(lists=dict(snapshot.lists)))
        assert first + drain(again, batch=3) == expected, stop_after


def test_file_source_without_matches_names_the_pattern(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"FileSource: no file matches .*\*\.nothing"):
        FileSource(str(tmp_path / "*.nothing")).splits()
