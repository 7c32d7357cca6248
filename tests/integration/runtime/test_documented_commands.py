"""docs/getting-started.md and docs/reference/cli.md match what the commands do and print.

The getting-started commands run as written (the default Spark host included), with three changes a
test needs: `/tmp/` paths go under the test's directory, `sluice run` gets `--rest-port 0` (another job
may hold 8081) and the documented `http://127.0.0.1:8081` becomes the address it printed. What they
print is compared with the samples in the page by shape: numbers, ids, times and paths vary, the words,
fields and columns must not. cli.md's synopsis must name exactly the options `sluice run` has.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from testkit.jobs import REPO

GETTING_STARTED = REPO / "docs" / "getting-started.md"
CLI_MD = REPO / "docs" / "reference" / "cli.md"
SLUICE = [sys.executable, "-m", "sluice.cli"]
_DOCUMENTED_URL = "http://127.0.0.1:8081"


def _blocks(path: Path) -> list[tuple[str, str]]:
    return re.findall(r"```(\w*)\n(.*?)```", path.read_text(), flags=re.DOTALL)


def _commands(block: str) -> list[str]:
    joined = block.replace("\\\n", " ")
    lines = [" ".join(line.split("  #")[0].split()) for line in joined.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _documented(prefix: str) -> str:
    """The one documented bash command that starts with `prefix`."""
    found = [c for _, b in _blocks(GETTING_STARTED) for c in _commands(b) if c.startswith(prefix)]
    assert found, f"docs/getting-started.md has no command starting {prefix!r}"
    return found[0]


def _shape(line: str) -> str:
    """A printed line with what varies from run to run made uniform."""
    line = re.sub(r"file://\S+", "URI", line)
    line = re.sub(r"\b[0-9a-f]{32}\b", "ID", line)
    line = re.sub(r"\d\d:\d\d:\d\d", "TIME", line)
    line = re.sub(r"\d[\d,.]*\s?(k/s|M/s|/s|%|ms|s|KiB|MiB|B)?(?![\w/])", "N", line)
    line = re.sub(r"\b(OK|LOW|HIGH)\b", "LEVEL", line)
    return " ".join(line.split())


class _Run:
    """A documented `sluice run`, in the background."""

    def __init__(self, command: str) -> None:
        argv = shlex.split(command)
        assert argv[0] == ".venv/bin/sluice", argv
        self.process = subprocess.Popen(
            [*SLUICE, *argv[1:], "--rest-port", "0"], cwd=REPO, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.url = ""
        self._seen = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip("\n"))
            match = re.search(r"REST API at (http://\S+)", line)
            if match and not self.url:
                self.url = match.group(1)
                self._seen.set()
        self._seen.set()

    def running(self) -> str:
        assert self._seen.wait(300) and self.url, "\n".join(self.lines)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/v1/job", timeout=10) as response:
                    if json.loads(response.read())["state"] == "RUNNING":
                        return self.url
            except OSError:
                pass  # the process is checked next
            time.sleep(0.2)
        self._reader.join(10)
        raise AssertionError("\n".join(self.lines))

    def wait(self) -> int:
        code = self.process.wait(300)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _sluice(command: str, tmp: Path, url: str) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command.replace(_DOCUMENTED_URL, url).replace("/tmp/", f"{tmp}/"))
    assert argv[0] == ".venv/bin/sluice", argv
    return subprocess.run(
        [*SLUICE, *argv[1:]], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def _status_sample() -> list[str]:
    for _, block in _blocks(GETTING_STARTED):
        if block.startswith("job "):
            return block.strip("\n").splitlines()
    raise AssertionError("docs/getting-started.md shows no `sluice status` output")


def _summary_sample() -> str:
    for _, block in _blocks(GETTING_STARTED):
        if block.startswith("sluice: summary:"):
            return block.splitlines()[0]
    raise AssertionError("docs/getting-started.md shows no run summary")


def test_the_getting_started_commands_do_and_print_what_the_page_says(tmp_path: Path) -> None:
    first = _Run(
        _documented(".venv/bin/sluice run examples/unbounded_counts.py").replace("/tmp/", f"{tmp_path}/")
    )
    try:
        url = first.running()
        # The REST address, the dashboard and the directories, as the page says.
        printed = "\n".join(first.lines)
        assert f"dashboard at {url}/" in printed
        assert f"checkpoints of this job: file://{tmp_path}/chk/" in printed
        deadline = time.monotonic() + 60
        while True:  # until a checkpoint shows, so that every documented section has rows
            status = _sluice(_documented(".venv/bin/sluice status --address"), tmp_path, url)
            assert status.returncode == 0, status.stderr
            if "checkpoint  COMPLETED" in status.stdout or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        shapes = {_shape(line) for line in status.stdout.splitlines()}
        sample = _status_sample()
        # The job, records, subtasks and checkpoint lines and both tables' headers, as documented.
        for line in [sample[0], sample[1], sample[2], sample[4], sample[8], sample[9], sample[-1]]:
            wanted = _shape(line)
            if line.startswith("last savepoint"):
                continue  # none yet: taken below
            assert wanted in shapes, f"documented {line!r}, printed:\n{status.stdout}"
        as_json = _sluice(_documented(".venv/bin/sluice status --address") + " -o json", tmp_path, url)
        assert json.loads(as_json.stdout)["state"] == "RUNNING"

        savepoint = _sluice(_documented(".venv/bin/sluice savepoint"), tmp_path, url)
        assert savepoint.returncode == 0, savepoint.stderr
        assert savepoint.stdout.strip().startswith(f"file://{tmp_path}/savepoints/savepoint-")
        stop = _sluice(_documented(".venv/bin/sluice stop --address http://127.0.0.1:8081"), tmp_path, url)
        assert stop.returncode == 0, stop.stderr
        assert first.wait() == 0, "\n".join(first.lines)
    finally:
        first.kill()
    stopped_with = stop.stdout.strip().splitlines()[-1]
    assert stopped_with.startswith(f"file://{tmp_path}/savepoints/savepoint-")

    resume = _documented(
        ".venv/bin/sluice run examples/unbounded_counts.py --arg out=/tmp/counts --parallelism 2 "
        "--checkpoint-dir file:///tmp/chk --from-savepoint"
    )
    resume = resume.replace("/tmp/", f"{tmp_path}/")
    second = _Run(re.sub(r"--from-savepoint \S+", f"--from-savepoint {stopped_with}", resume))
    try:
        url = second.running()
        assert any("restored from savepoint" in line and stopped_with in line for line in second.lines)
        drain = _documented(".venv/bin/sluice stop --address http://127.0.0.1:8081 --drain")
        drained = _sluice(drain, tmp_path, url)
        assert drained.returncode == 0, drained.stderr
        assert second.wait() == 0, "\n".join(second.lines)
    finally:
        second.kill()
    summary = [line for line in second.lines if line.startswith("sluice: summary:")]
    assert len(summary) == 1, second.lines
    documented = _shape(_summary_sample())
    assert _shape(summary[0]) == documented, (summary[0], _summary_sample())
    assert re.fullmatch(rf"sluice: job \S+ FINISHED; savepoint file://{tmp_path}/\S+", second.lines[-1])


def test_the_cli_synopsis_names_every_option_of_sluice_run_and_no_other() -> None:
    synopsis = _blocks(CLI_MD)[0][1]
    run_part = synopsis.split("sluice run", 1)[1].split("sluice status", 1)[0]
    documented = set(re.findall(r"\[(--[a-z-]+)", run_part))
    helped = subprocess.run(
        [*SLUICE, "run", "--help"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    ).stdout
    options = set(re.findall(r"^  (--[a-z-]+)", helped, flags=re.MULTILINE)) - {"--help"}
    assert documented == options, {"undocumented": options - documented, "gone": documented - options}
    top = subprocess.run([*SLUICE, "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert "sluice --version" in synopsis and top.stdout.startswith("sluice ")
