"""Background processes of the Kubernetes test environment that never outlive the test session.

Each one runs in its own session with a parent-death signal, so a pytest killed outright does not
leave an API server or pod processes behind; a normal exit stops them through `stop` (fixture
teardown) or, failing that, an atexit hook.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

_PR_SET_PDEATHSIG = 1
# Loaded here, not in the child: dlopen between fork and exec could wait on a loader lock forever.
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent(parent: int, signum: int) -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


class ManagedProcess:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        death_signal: int = signal.SIGKILL,
    ) -> None:
        """Start `argv`; if the test session dies without stopping it, it gets `death_signal`.

        SIGKILL suits servers whose state is thrown away (a graceful kube-apiserver shutdown can
        hang once etcd is gone); SIGTERM suits processes that must clean up after themselves.
        """
        self.name = name
        self.log_path = log_path
        parent = os.getpid()
        with log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
                # Runs between fork and exec; it only calls prctl through an already loaded libc,
                # so the usual risk of preexec_fn in a threaded parent (a held lock) does not arise.
                preexec_fn=lambda: _die_with_parent(parent, death_signal),  # noqa: PLW1509
            )
        atexit.register(self.stop)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; safe to call more than once."""
        atexit.unregister(self.stop)
        if self.popen.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()
