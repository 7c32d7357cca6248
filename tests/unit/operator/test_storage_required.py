"""Without the operator's storage root, a job must name its own directories; the message says which."""

from __future__ import annotations

import dataclasses

import pytest

from sluice_operator import manifests as m
from sluice_operator.manifests.run import placeholders

from ._fixtures import CONFIG, OWNER, spec

NO_ROOT = dataclasses.replace(CONFIG, storage=None)
OWN_DIRS = {"checkpoints": {"storage": "s3://b/chk"}, "savepoints": {"targetDirectory": "s3://b/sp"}}


def test_with_a_storage_root_nothing_is_missing() -> None:
    assert m.missing_storage(spec(), CONFIG) is None


def test_without_one_every_unset_directory_and_the_placeholder_are_named() -> None:
    message = m.missing_storage(spec(), NO_ROOT)
    assert message is not None
    for named in ("spec.checkpoints.storage", "spec.savepoints.targetDirectory", "$(SLUICE_STORAGE)"):
        assert named in message
    assert "operator.storage" in message and "SLUICE_OPERATOR_STORAGE" in message
    with pytest.raises(m.StorageMissingError, match="no storage for this job"):
        m.checkpoint_dir(spec(), OWNER, NO_ROOT)


def test_own_directories_suffice_unless_the_placeholder_is_still_used() -> None:
    uses_placeholder = spec(**OWN_DIRS)
    message = m.missing_storage(uses_placeholder, NO_ROOT)
    assert message is not None and "$(SLUICE_STORAGE)" in message
    assert "spec.checkpoints.storage," not in message
    plain = spec(**OWN_DIRS, pipeline={"file": "examples/unbounded_counts.py", "args": {"out": "s3://b/o"}})
    assert m.missing_storage(plain, NO_ROOT) is None
    assert m.checkpoint_dir(plain, OWNER, NO_ROOT) == "s3://b/chk"
    assert "SLUICE_STORAGE" not in placeholders(OWNER, NO_ROOT)
