"""`sluice-operator`: run the kopf controller for StreamJobs and Savepoints."""

from __future__ import annotations

import argparse
import logging
import os
import sys

ENV_NAMESPACES = "SLUICE_OPERATOR_NAMESPACES"
ENV_PEERING = "SLUICE_OPERATOR_PEERING"
# Characters that make a --namespace a kopf pattern (glob, negation, list) rather than one namespace.
_PATTERN_CHARS = frozenset("*?!,")


def exact_namespaces(namespaces: list[str] | None) -> bool:
    """Whether every watched namespace is named exactly, so that none has to be discovered."""
    return bool(namespaces) and not any(_PATTERN_CHARS & set(ns) for ns in namespaces or ())


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
        help="kopf peering object used for leader election between replicas",
    )
    peering.add_argument("--standalone", action="store_true", help="no leader election (a single replica)")
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
    return args


def main(argv: list[str] | None = None) -> int:
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

    settings = kopf.OperatorSettings()
    # Kopf lists and watches Namespaces to match namespace patterns. Exact names need no discovery,
    # and the chart's least-privilege RBAC does not let the operator list Namespaces: kopf would retry
    # the forbidden listing for about a minute before it falls back to the names it was given. (CRDs
    # are then looked up once, at start: install them first, as the chart does.)
    settings.scanning.disabled = exact_namespaces(args.namespace)
    kopf.run(
        settings=settings,
        clusterwide=args.all_namespaces,
        namespaces=args.namespace or (),
        standalone=args.standalone or args.peering is None,
        peering_name=args.peering,
        liveness_endpoint=args.liveness or None,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
