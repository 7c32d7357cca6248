"""Whether a process of this machine still runs, for tests that wait for processes to end."""

from __future__ import annotations

from pathlib import Path


def running(pid: int) -> bool:
    """Whether `pid` still runs: an ended process its parent has not reaped yet (a zombie) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    # The state follows the command's name, which is in parentheses and may hold anything.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
