"""`StreamJob.spec`: what the user asks for. Field docs become the CRD's `kubectl explain` text."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from sluice_contract.states import RestartKind

from ._base import CamelModel, Duration, ObjectName, Quantity, Uri
from .enums import JobState, StateBackend, UpgradeMode

PodTemplate = Annotated[
    dict[str, Any],
    Field(
        json_schema_extra={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        description="A partial Pod (metadata and spec) merged under what the operator generates.",
    ),
]


class Resources(CamelModel):
    """Container resources, as in a Pod."""

    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class PipelineSpec(CamelModel):
    """The pipeline to run: a file inside the image (relative paths start at $SLUICE_HOME) or a module."""

    file: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description=("Path of the pipeline file inside the image, e.g. examples/unbounded_counts.py."),
    )
    module: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        pattern=r"^[A-Za-z_][\w.]*$",
        description="Dotted name of an importable pipeline module.",
    )
    args: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Pipeline arguments passed as --arg key=value. $(SLUICE_STORAGE), $(SLUICE_NAMESPACE) and "
            "$(SLUICE_JOB_NAME) are replaced by the operator's storage root, the namespace and the job name."
        ),
    )

    @model_validator(mode="after")
    def _one_entry_point(self) -> PipelineSpec:
        if (self.file is None) == (self.module is None):
            raise ValueError("set exactly one of pipeline.file and pipeline.module")
        return self


class TaskManagerSpec(CamelModel):
    """TaskManagers are Spark executor pods; each runs long-lived barrier tasks."""

    replicas: int = Field(default=1, ge=1, le=1024, description="Number of TaskManager pods.")
    resources: Resources | None = None
    pod_template: PodTemplate | None = None


class CoordinatorSpec(CamelModel):
    """The coordinator pod runs `sluice run` and is the Spark driver."""

    resources: Resources | None = None
    pod_template: PodTemplate | None = None


class CheckpointSpec(CamelModel):
    storage: Uri | None = Field(
        default=None,
        description=(
            "Directory this job owns for checkpoints and job results. Default: "
            "<operator storage root>/checkpoints/<namespace>/<name>."
        ),
    )
    interval: Duration = Field(default="10s", description="Time between checkpoints.")
    timeout: Duration = Field(default="10m", description="A checkpoint not complete by then fails.")
    min_pause: Duration = Field(default="0s", description="Least time between two checkpoints.")
    retained: int = Field(default=3, ge=1, le=100, description="Completed checkpoints kept in storage.")
    after_tasks_finish: bool = Field(
        default=True,
        description=(
            "Keep checkpointing after some tasks finished (FLIP-147); off declines such checkpoints."
        ),
    )


class RestartStrategySpec(CamelModel):
    """How the coordinator restarts the job from its latest checkpoint after a failure (a lost
    TaskManager, a failed task, checkpoints that keep failing)."""

    kind: RestartKind = Field(
        default=RestartKind.EXPONENTIAL,
        description="exponential (delays double up to maxDelay), fixed-delay, or none (fail at once).",
    )
    delay: Duration = Field(default="1s", description="The (first) delay before a restart.")
    max_delay: Duration = Field(default="1m", description="exponential: the longest delay.")
    max_restarts: int = Field(
        default=20,
        ge=0,
        le=100000,
        description="Failures in a row (without a stable period) before the job fails.",
    )
    reset_after: Duration = Field(
        default="1h", description="A job that ran this long since its last failure counts afresh."
    )


class FailureDetectionSpec(CamelModel):
    heartbeat_timeout: Duration = Field(
        default="10s", description="A TaskManager silent this long (hung, stopped, cut off) is lost."
    )
    tolerable_checkpoint_failures: int | None = Field(
        default=0,
        ge=0,
        description=(
            "Checkpoints in a row that may time out or fail to write before the job fails over "
            "(as Flink's tolerable-failed-checkpoints); null: any number."
        ),
    )


class SavepointPolicy(CamelModel):
    """How the operator takes, keeps and disposes of savepoints of this job."""

    target_directory: Uri | None = Field(
        default=None,
        description=("Where savepoints go. Default: <operator storage root>/savepoints/<namespace>/<name>."),
    )
    periodic_interval: Duration | None = Field(
        default=None, description=("Take a savepoint of the running job this often (unset: never).")
    )
    history_max_count: int = Field(
        default=10,
        ge=1,
        le=1000,
        description=(
            "Completed savepoints the operator keeps; older ones are deleted (the latest is always kept)."
        ),
    )
    history_max_age: Duration | None = Field(
        default=None,
        description=(
            "Delete operator-made savepoints older than this (the latest completed one is always kept)."
        ),
    )
    dispose_on_delete: bool = Field(
        default=False,
        description=(
            "Savepoints the operator creates delete their files when their Savepoint object is deleted."
        ),
    )
    on_delete: bool = Field(
        default=False,
        description=("Take a stop-with-savepoint (suspend) before a running StreamJob is deleted."),
    )


class StreamJobSpec(CamelModel):
    """Desired state of a Sluice streaming job."""

    image: str = Field(min_length=1, max_length=512, description="Image with Sluice and the pipeline.")
    image_pull_policy: str | None = Field(
        default=None, pattern=r"^(Always|IfNotPresent|Never)$", description="Always, IfNotPresent or Never."
    )
    pipeline: PipelineSpec
    parallelism: int = Field(default=1, ge=1, le=32768, description="Default parallelism of operators.")
    task_managers: TaskManagerSpec = Field(default_factory=TaskManagerSpec)
    coordinator: CoordinatorSpec = Field(default_factory=CoordinatorSpec)
    checkpoints: CheckpointSpec = Field(default_factory=CheckpointSpec)
    savepoints: SavepointPolicy = Field(default_factory=SavepointPolicy)
    state: JobState = Field(default=JobState.RUNNING, description="running, suspended or finished.")
    upgrade_mode: UpgradeMode = Field(
        default=UpgradeMode.SAVEPOINT,
        description=("How state is carried over a spec change: stateless, savepoint or last-state."),
    )
    initial_savepoint: Uri | None = Field(
        default=None, description=("Savepoint or checkpoint the first run starts from.")
    )
    allow_non_restored_state: bool = Field(
        default=False,
        description=("Start even if some state of the savepoint belongs to no operator of the pipeline."),
    )
    trust_savepoint: bool = Field(
        default=False,
        description=(
            "Restore initialSavepoint even if it was not authenticated with this namespace's state key "
            "(Secret sluice-state-key): a savepoint of another namespace or cluster, or one written before "
            "Sluice authenticated stored state. The coordinator logs that it did. Only for savepoints "
            "whose origin you know."
        ),
    )
    restart_nonce: int | None = Field(
        default=None,
        description=("Change this number to restart the job (with its upgrade mode) without another change."),
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description=("Extra Spark configuration for the driver and executors (spark.* keys)."),
    )
    service_account: ObjectName | None = Field(
        default=None,
        description=("Service account of the coordinator (Spark driver); default: one the operator creates."),
    )
    storage_secret: ObjectName | None = Field(
        default=None,
        description=(
            "Secret whose keys become environment variables of all job pods and are used by the operator "
            "to read checkpoints (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...)."
        ),
    )
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment of all job pods.")
    restart_strategy: RestartStrategySpec = Field(default_factory=RestartStrategySpec)
    failure_detection: FailureDetectionSpec = Field(default_factory=FailureDetectionSpec)
    state_backend: StateBackend = Field(
        default=StateBackend.HEAP,
        description=(
            "Where keyed state and window contents live in a TaskManager: heap (memory) or disk (on the "
            "TaskManager's local disk, for state larger than memory). Changing it restarts the job with "
            "its upgrade mode."
        ),
    )

    @model_validator(mode="after")
    def _spark_conf_keys(self) -> StreamJobSpec:
        bad = [key for key in self.spark_conf if not key.startswith("spark.")]
        if bad:
            raise ValueError(f"sparkConf keys must start with 'spark.': {', '.join(sorted(bad))}")
        return self
