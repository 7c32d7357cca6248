"""`python -m sluice_spark_daemon`: the zygote, a daemon handed over to it, or a daemon started here."""

from __future__ import annotations

import os
import sys

from sluice_spark_daemon import SERVE_ENV, SOCKET_ENV, hand_over


def main() -> None:
    if SERVE_ENV in os.environ:
        from sluice.hosts.spark._zygote import serve_here

        serve_here()
        return
    zygote = os.environ.get(SOCKET_ENV)
    if zygote and hand_over(zygote):
        sys.exit(0)
    from sluice.hosts.spark._daemon import main as start_daemon

    start_daemon()


if __name__ == "__main__":
    main()
