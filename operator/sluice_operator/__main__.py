"""`sluice-operator`: run the kopf controller for StreamJobs and Savepoints."""

from __future__ import annotations

import argparse
import logging
import os
import random
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import threading

ENV_NAMESPACES = "SLUICE_OPERATOR_NAMESPACES"
ENV_PEERING = "SLUICE_OPERATOR_PEERING"
ENV_PRIORITY = "SLUICE_OPERATOR_PRIORITY"
ENV_PEERING_LIFETIME = "SLUICE_OPERATOR_PEERING_LIFETIME"
ENV_IDENTITY = "SLUICE_OPERATOR_IDENTITY"
# Characters that make a --namespace a kopf pattern (glob, negation, list) rather than one namespace.
_PATTERN_CHARS = frozenset("*?!,")
# Kopf refreshes a peer entry 5-10 s before it expires: shorter lifetimes leave no room for a slow patch.
MIN_PEERING_LIFETIME = 15

log = logging.getLogger("sluice_operator")


def exact_namespaces(namespaces: list[str] | None) -> bool:
    """Whether every watched namespace is named exactly, so that none has to be discovered."""
    return bool(namespaces) and not any(_PATTERN_CHARS & set(ns) for ns in namespaces or ())


def start_time_priority() -> int:
    """A kopf peering priority that ranks replicas by start time: the one running longest leads.

    Kopf pauses an operator that sees a live peer of higher priority, and pauses *every* operator when
    two share a priority, so replicas of one Deployment must not use kopf's default 0. Ranking by age
    (rather than a random number per start) means a replica that restarts, or a new one of a rolling
    update, joins as a standby instead of taking the jobs away from the leader mid-work. The random
    sub-millisecond part breaks ties between replicas started in the same millisecond. Every such
    priority is negative: an operator given `--priority 0` or more outranks all of them.
    """
    return -(int(time.time() * 1000) * 1000 + random.randrange(1000))


def _int_env(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"sluice-operator: ${name} must be an integer, not {raw!r}") from None


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="sluice-operator",
        description="Kubernetes operator for Sluice StreamJob and Savepoint resources.",
        epilog=(
            "Configuration by environment: SLUICE_OPERATOR_STORAGE (default storage root of jobs), "
            "SLUICE_OPERATOR_STORAGE_SECRET, SLUICE_OPERATOR_JOB_ENV_<NAME> (env of every job pod), "
            "SLUICE_OPERATOR_RECONCILE_INTERVAL, SLUICE_OPERATOR_METRICS_PORT, KUBECONFIG."
        ),
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=None,
        help=f"watch this namespace (repeatable; default: ${ENV_NAMESPACES}, comma-separated)",
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    peering = parser.add_mutually_exclusive_group()
    peering.add_argument(
        "--peering",
        default=os.environ.get(ENV_PEERING) or None,
        help=(
            "kopf peering object used for leader election between replicas: a KopfPeering of this name "
            "in every watched namespace, or a ClusterKopfPeering with --all-namespaces "
            f"(default: ${ENV_PEERING})"
        ),
    )
    peering.add_argument("--standalone", action="store_true", help="no leader election (a single replica)")
    parser.add_argument(
        "--priority",
        type=int,
        default=_int_env(ENV_PRIORITY),
        help=(
            "peering priority: the live peer with the highest one acts, the others wait (default: "
            f"${ENV_PRIORITY}, else ranked by start time so that the oldest replica leads; any value >= 0 "
            "outranks replicas ranked by start time)"
        ),
    )
    parser.add_argument(
        "--peering-lifetime",
        type=int,
        default=_int_env(ENV_PEERING_LIFETIME) or 60,
        help=(
            "seconds a peer entry stays valid without a keep-alive: how long a standby waits before it "
            f"takes over from a replica that died without saying so (default: ${ENV_PEERING_LIFETIME} or 60)"
        ),
    )
    parser.add_argument(
        "--identity",
        default=os.environ.get(ENV_IDENTITY) or f"{socket.gethostname()}-{os.getpid()}",
        help=f"this replica's name in the peering object and in its events (default: ${ENV_IDENTITY}, "
        "else host name and process id)",
    )
    parser.add_argument("--liveness", default="http://0.0.0.0:8080/healthz", help="liveness endpoint URL")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.namespace is None and not args.all_namespaces:
        from_env = [ns.strip() for ns in os.environ.get(ENV_NAMESPACES, "").split(",") if ns.strip()]
        if not from_env:
            parser.error(
                f"say which namespaces to watch: --namespace NS, --all-namespaces or ${ENV_NAMESPACES}"
            )
        args.namespace = from_env
    if args.standalone:
        args.peering = None
    if args.peering is not None and args.peering_lifetime < MIN_PEERING_LIFETIME:
        parser.error(
            f"--peering-lifetime {args.peering_lifetime} is too short: kopf renews a peer entry 5-10 s "
            f"before it expires, so use at least {MIN_PEERING_LIFETIME} seconds"
        )
    if args.peering is not None and args.priority is None:
        args.priority = start_time_priority()
    return args


def main(
    argv: list[str] | None = None,
    *,
    stop_flag: threading.Event | None = None,
    ready_flag: threading.Event | None = None,
) -> int:
    """Runs the operator until SIGINT or SIGTERM; on a thread other than the main one (signals reach only
    that), until `stop_flag` is set. `ready_flag` is set once it has started."""
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from sluice_operator.models import ConfigError, OperatorConfig

    try:
        OperatorConfig.from_env()
    except ConfigError as error:
        print(f"sluice-operator: {error}", file=sys.stderr)
        return 2
    import kopf

    import sluice_operator.handlers  # noqa: F401  (registers the handlers)
    from sluice_operator.handlers import metrics
    from sluice_operator.handlers._runtime import RUNTIME, Election

    settings = kopf.OperatorSettings()
    # Kopf lists and watches Namespaces to match namespace patterns. Exact names need no discovery,
    # and the chart's least-privilege RBAC does not let the operator list Namespaces: kopf would retry
    # the forbidden listing for about a minute before it falls back to the names it was given. (CRDs
    # are then looked up once, at start: install them first, as the chart does.)
    settings.scanning.disabled = exact_namespaces(args.namespace)
    # Events name the replica that acted, so `kubectl get events -o wide` shows who the leader was.
    settings.posting.reporting_component = "sluice-operator"
    settings.posting.reporting_instance = args.identity
    # kopf types the identity as its own NewType of str, which it does not export.
    peering: dict[str, Any] = {"standalone": True, "identity": args.identity}
    if args.peering is not None:
        settings.peering.lifetime = args.peering_lifetime
        peering.update(standalone=False, peering_name=args.peering, priority=args.priority)
        log.info(
            "leader election through kopf peering %r as %r, priority %d, peer lifetime %d s",
            args.peering,
            args.identity,
            args.priority,
            args.peering_lifetime,
        )
    metrics.record_identity(args.identity, args.peering, args.priority)
    RUNTIME.election = None
    if args.peering is not None:
        exact = tuple(args.namespace) if exact_namespaces(args.namespace) else ()
        RUNTIME.election = Election(args.peering, exact, bool(args.all_namespaces))
    if not settings.scanning.disabled:
        from sluice_operator.kube import _namespace_watch

        _namespace_watch.install()
    kopf.run(
        settings=settings,
        clusterwide=args.all_namespaces,
        namespaces=args.namespace or (),
        liveness_endpoint=args.liveness or None,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
        **peering,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
