"""Run the process kubelet: `python -m testkit.kubelet --kubeconfig K --node-name N --state-dir D`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from ._api import KubeApi
from ._host_paths import HiddenHostPath, refuse_hidden_paths
from ._images import default_images, images_from_json
from ._kubelet import Kubelet


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m testkit.kubelet", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node-name", required=True)
    parser.add_argument("--state-dir", required=True, type=Path, help="pod volumes, hosts files and logs")
    parser.add_argument("--pod-cidr", default="127.64.0.0/16", help="loopback range for pod IPs")
    parser.add_argument(
        "--images", type=Path, help="JSON file: image pattern -> {entrypoint, cmd, env, workdir}"
    )
    parser.add_argument("--node-label", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--backoff-base", type=float, default=1.0, help="first restart delay, seconds")
    parser.add_argument("--backoff-max", type=float, default=10.0, help="longest restart delay, seconds")
    parser.add_argument(
        "--ready-file", type=Path, help="created once the node is registered and pods are watched"
    )
    return parser.parse_args()


async def _main(args: argparse.Namespace) -> None:
    log = logging.getLogger("process-kubelet")
    images = images_from_json(args.images.read_text()) if args.images else default_images()
    refuse_hidden_paths(images)  # before any pod: each would fail to start with a bare ENOENT
    labels = dict(label.split("=", 1) for label in args.node_label)
    api = await KubeApi.from_kubeconfig(args.kubeconfig)
    kubelet = Kubelet(
        api,
        args.node_name,
        state_dir=args.state_dir,
        images=images,
        pod_cidr=args.pod_cidr,
        node_labels=labels,
        backoff=(args.backoff_base, args.backoff_max),
        log=log,
    )

    def ready() -> None:
        log.info("node %s registered; watching pods", args.node_name)
        if args.ready_file:
            args.ready_file.write_text("ready\n")

    run = asyncio.create_task(kubelet.run(ready))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, run.cancel)
    try:
        await run
    except asyncio.CancelledError:
        log.info("stopping: ending the pods' processes")
    finally:
        await kubelet.shutdown()
        await api.close()


def main() -> None:
    args = _parse()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_main(args))
    except HiddenHostPath as problem:
        sys.exit(f"process kubelet: {problem}")


if __name__ == "__main__":
    main()
