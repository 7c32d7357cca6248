"""Which checkpoint failures count toward failing the job over, and how many in a row are tolerated.

The rules are Flink's (`execution.checkpointing.tolerable-failed-checkpoints`): a checkpoint that timed
out, or whose state or `_metadata` could not be written, counts; one declined because tasks finished or
were not running, because an alignment gave way to a newer barrier, or because the attempt ended does
not, and neither does a savepoint (its failure goes to whoever asked for it; the job goes on). A
completed checkpoint resets the count. The default, as in Flink, tolerates none: a job whose checkpoints
cannot complete fails over to its latest checkpoint instead of running on with transactions that only a
checkpoint commits (a Kafka transaction outlives its timeout, a database holds prepared transactions).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FailureCounter:
    tolerable: int | None
    """Counted failures in a row that are tolerated; None: any number."""
    in_a_row: int = 0

    def counted_failure(self) -> bool:
        """Records a counted failure; True when it is one more than tolerated."""
        self.in_a_row += 1
        return self.tolerable is not None and self.in_a_row > self.tolerable

    def completed(self) -> None:
        self.in_a_row = 0

    def reset(self) -> None:
        """A new attempt starts counting afresh: its failover already answered the earlier failures."""
        self.in_a_row = 0

    def describe(self) -> str:
        return f"{self.in_a_row} checkpoint(s) failed in a row, {self.tolerable} tolerated"
