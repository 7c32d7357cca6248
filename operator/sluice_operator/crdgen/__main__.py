"""`python -m sluice_operator.crdgen [ROOT]`: write the CRDs into ROOT/crds and the chart (default: .)."""

from __future__ import annotations

import sys
from pathlib import Path

from . import write


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path.cwd()
    for path in write(root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
