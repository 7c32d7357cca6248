"""docs/testing.md's example files, run as a user would run them: written out and given to pytest."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from testkit.jobs import REPO

# A fenced python block whose first line names its file: "# orders.py".
_FILE_BLOCK = re.compile(r"```python\n# (\w+\.py)\n(.*?)```", re.DOTALL)


def test_the_testing_guide_example_passes(tmp_path: Path) -> None:
    files = _FILE_BLOCK.findall((REPO / "docs" / "testing.md").read_text())
    assert [name for name, _ in files] == ["orders.py", "test_orders.py"]
    for name, body in files:
        (tmp_path / name).write_text(body)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_orders.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout, run.stdout
