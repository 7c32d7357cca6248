"""The `sluice` command: run a pipeline, and talk to a running job's coordinator."""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import sys

from sluice._client import ClientError, client_command
from sluice._durations import parse_duration
from sluice._sizes import parse_size
from sluice._states import RestartKind
from sluice._tokens import ENV_VAR
from sluice.hosts.processes import ProcessHost


def _version() -> str:
    try:
        return importlib.metadata.version("sluice")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _address(text: str) -> str:
    # `127.0.0.1:8081` is what `sluice run` prints people to copy: take it as the http URL it means.
    return text if "://" in text else f"http://{text}"


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    return key, value


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _tolerable(text: str) -> int | None:
    if text == "unlimited":
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: give 0, 1, 2, ... or 'unlimited'")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not -1 <= value <= 65535:
        raise argparse.ArgumentTypeError(
            f"{value} is not a port: give 1 to 65535, 0 to pick a free one, or -1 to serve no REST API"
        )
    return value


def _interval(text: str) -> float:
    value = _duration(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: the checkpoint interval must be longer than 0")
    return value


def _restore_arguments(run: argparse.ArgumentParser) -> None:
    """Where a run starts from, and what it accepts there."""
    run.add_argument(
        "--from-savepoint", default=None, help="a savepoint or retained checkpoint to start from"
    )
    run.add_argument(
        "--allow-non-restored-state",
        action="store_true",
        help="drop (and name) the state of operators the job no longer has, instead of refusing it",
    )
    run.add_argument(
        "--trust-savepoint",
        action="store_true",
        help="restore --from-savepoint even when its _metadata was not authenticated with this "
        "deployment's state key (a savepoint of another deployment, or one written before MACs); "
        "logged. Never applies to the job's own checkpoints",
    )
    run.add_argument(
        "--state-key-file",
        default=None,
        metavar="FILE",
        help="the deployment's key that authenticates checkpoints and savepoints; else "
        "$SLUICE_STATE_KEY_FILE, else ~/.config/sluice/state.key (made on first use)",
    )


def _rest_arguments(run: argparse.ArgumentParser) -> None:
    """The coordinator's REST API: where it listens, who may call it, where it may write savepoints."""
    run.add_argument(
        "--rest-port",
        type=_port,
        default=8081,
        help="0 picks a free port, -1 serves no REST API; default 8081",
    )
    run.add_argument("--rest-host", default="127.0.0.1", help="default 127.0.0.1")
    run.add_argument(
        "--rest-token-file",
        default=None,
        metavar="FILE",
        help=f"the REST API's bearer token; else ${ENV_VAR}, else a new one stored for this user",
    )
    run.add_argument(
        "--rest-auth",
        choices=["mutations", "all"],
        default=None,
        help="which requests need the token: those that change the job, or all but /v1/health; "
        "default: mutations on a loopback --rest-host, all on any other",
    )
    run.add_argument(
        "--rest-allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name REST requests may carry in their Host header, besides loopback names, "
        "--rest-host and IP addresses (DNS-rebinding protection); '*' allows any; repeatable",
    )
    run.add_argument(
        "--savepoint-dir-allow",
        action="append",
        default=[],
        metavar="URI",
        help="a directory REST savepoint requests may target, besides the job's savepoint and checkpoint "
        "directories; repeatable",
    )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="sluice", description="Streaming jobs with Flink's finishing semantics."
    )
    top.add_argument("--version", action="version", version=f"sluice {_version()}")
    sub = top.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a pipeline in the foreground until it ends")
    run.add_argument("pipeline", help="a Python file that defines build(env)")
    run.add_argument(
        "--arg", action="append", type=_key_value, default=[], metavar="K=V", help="available as env.args[K]"
    )
    run.add_argument("--parallelism", type=_positive, default=1, help="subtasks per operator; default 1")
    run.add_argument(
        "--max-parallelism",
        type=_positive,
        default=128,
        help="key groups: the highest parallelism the job's keyed state can be rescaled to; default 128",
    )
    run.add_argument("--taskmanagers", type=_positive, default=None, help="default: the parallelism")
    run.add_argument("--checkpoint-dir", default=None, help="URI; default: a local directory (printed)")
    run.add_argument("--checkpoint-interval", type=_interval, default=None, help="e.g. 1s; default 10s")
    run.add_argument("--checkpoint-timeout", type=_duration, default=600.0, help="default 10m")
    run.add_argument(
        "--min-pause", type=_duration, default=0.0, help="between a checkpoint's end and the next; default 0s"
    )
    run.add_argument(
        "--checkpoints-retained", type=_positive, default=1, help="completed checkpoints kept; default 1"
    )
    run.add_argument(
        "--state-backend",
        choices=["heap", "disk"],
        default="heap",
        help="where keyed state and window contents live: heap (memory, default) or disk (LMDB on the "
        "TaskManager's local disk, for state larger than memory; SLUICE_STATE_DIR picks the directory)",
    )
    run.add_argument(
        "--tolerable-checkpoint-failures",
        type=_tolerable,
        default=0,
        metavar="N|unlimited",
        help="checkpoints in a row that may time out or fail to write before the job fails over to its "
        "latest checkpoint; default 0, as in Flink (declined checkpoints and savepoints do not count)",
    )
    run.add_argument(
        "--no-checkpoints-after-tasks-finish",
        action="store_true",
        help="decline checkpoints once any task has finished (behaviour before FLIP-147)",
    )
    run.add_argument(
        "--savepoint-dir", default=None, help="URI; default: <checkpoint-dir>/savepoints (printed)"
    )
    _restore_arguments(run)
    run.add_argument(
        "--job-id", default=None, help="default: a new random id; the same id resumes a suspended job"
    )
    _rest_arguments(run)
    run.add_argument(
        "--heartbeat-timeout",
        type=_duration,
        default=10.0,
        help="a TaskManager silent this long (stopped, crashed, cut off) fails the attempt; default 10s",
    )
    run.add_argument(
        "--internal-tls",
        action="store_true",
        help="encrypt the coordinator's and TaskManagers' connections with TLS, under a certificate "
        "authority made for the job (they are authenticated by the job's secret either way)",
    )
    run.add_argument(
        "--max-frame-size",
        type=_size,
        default="64MiB",
        metavar="SIZE",
        help="the largest message on a control or data connection (e.g. 64MiB): a larger record batch "
        "fails its sender, a larger announced frame closes the connection; default 64MiB",
    )
    run.add_argument(
        "--host",
        choices=["spark", "processes"],
        default="spark",
        help="where TaskManagers run: Spark barrier tasks (default) or plain local processes",
    )
    run.add_argument(
        "--master",
        default=None,
        help="Spark master URL (--host spark); default local[N], N = the number of TaskManagers",
    )
    run.add_argument(
        "--spark-conf",
        action="append",
        type=_key_value,
        default=[],
        metavar="K=V",
        help="a Spark setting (--host spark); repeatable",
    )
    run.add_argument(
        "--spark-log",
        default=None,
        metavar="FILE",
        help="where Spark's own log goes (--host spark); default: a file per job, printed at start",
    )
    run.add_argument(
        "--restart-strategy",
        choices=[k.value for k in RestartKind],
        default=RestartKind.FIXED_DELAY.value,
        help="default fixed-delay",
    )
    run.add_argument(
        "--max-restarts",
        type=int,
        default=3,
        help="restarts in a row (without a stable period between); default 3",
    )
    run.add_argument("--restart-delay", type=_duration, default=1.0, help="the (first) delay; default 1s")
    run.add_argument(
        "--restart-max-delay", type=_duration, default=60.0, help="exponential: the longest delay; default 1m"
    )
    run.add_argument(
        "--restart-reset-after",
        type=_duration,
        default=3600.0,
        help="a job that ran this long since its last failure counts restarts afresh; default 1h",
    )
    run.add_argument("--quiet", action="store_true", help="no progress lines")
    run.add_argument(
        "--verbose",
        action="store_true",
        help="also log at INFO level, with the whole traceback (the engine's frames too) of a failed task",
    )

    status = sub.add_parser(
        "status", help="print a running job's state: a summary, or the GET /v1/job document (-o json)"
    )
    savepoint = sub.add_parser("savepoint", help="take a savepoint; the job keeps running")
    stop = sub.add_parser("stop", help="stop the job with a savepoint (SUSPEND, or TERMINATE with --drain)")
    cancel = sub.add_parser("cancel", help="cancel the job without a savepoint")
    for client in (status, savepoint, stop, cancel):
        client.add_argument(
            "--address",
            required=True,
            type=_address,
            help="the coordinator's REST URL, e.g. http://127.0.0.1:8081 (without a scheme: http)",
        )
        client.add_argument(
            "--token",
            default=None,
            help=f"the job's REST token; default: ${ENV_VAR}, else the token `sluice run` stored for "
            "this user",
        )
    status.add_argument(
        "-o",
        "--output",
        choices=["text", "json"],
        default="text",
        help="text: job, rates, vertices, recent checkpoints (default); json: the GET /v1/job document",
    )
    savepoint.add_argument("--savepoint-dir", default=None)
    stop.add_argument(
        "--drain", action="store_true", help="flush everything first: fire all windows (TERMINATE)"
    )
    stop.add_argument("--savepoint-dir", default=None)
    return top


def _run(args: argparse.Namespace) -> int:
    early: ProcessHost | None = None
    if args.host == "processes":
        # Before the coordinator's own imports: the TaskManagers import the engine meanwhile.
        early = ProcessHost()
        early.start_early(args.taskmanagers or args.parallelism)
    try:
        from sluice._private_dirs import PrivateDirectoryError, scratch_directory, scratch_path
        from sluice._runner import EXIT_USAGE, run_command

        # The modules imported so far live as long as this process: out of the collector's walks from
        # now on. A full collection then costs a few ms instead of 13-24 (one fell between PySpark's
        # imports and the driver JVM's launch), in a coordinator that may run for days.
        gc.freeze()
        try:  # a default under the shared $TMPDIR is this user's alone, or not used at all
            default = scratch_directory("checkpoints") if args.checkpoint_dir is None else None
        except PrivateDirectoryError as err:
            print(f"sluice: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        checkpoints = str(default or scratch_path("checkpoints"))
        return run_command(args, default_checkpoint_dir=checkpoints, process_host=early)
    finally:
        if early is not None:
            early.discard_early()


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.command == "run":
        code = _run(args)
        # The interpreter's teardown walks every object the collector tracks, several times over, to
        # find cycles among objects it frees anyway: about 0.1 s after each job on the Spark host
        # (PySpark, py4j and the job's own objects), between the job's last line and the prompt.
        # Frozen, they are left to the process's exit. What is left in a cycle then is not finalized,
        # so nothing may count on that: the job's outputs are committed, its files closed and the
        # logs flushed (logging's own exit handler) before this line or without the collector.
        gc.freeze()
        sys.exit(code)
    try:
        sys.exit(client_command(args))
    except ClientError as err:
        print(f"sluice {args.command}: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
