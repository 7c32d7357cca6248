"""An attacker's view of a running job: its listening ports, found as a stranger on the machine would.

`listening_ports` reads /proc (the sockets a process holds and the kernel's table of listening TCP
sockets), the way `ss -ltnp` does; `attack` sends each port what the security issue listed: a pickle
whose loading runs code, random bytes, half a frame, a 4 GiB length header, a handshake with a wrong
proof, and a connection that says nothing. Every connection is bounded in time.

The file also runs on its own, as the process of an attacker's pod (`python probe.py PLAN`, see
`main`): the e2e tests mount it from a ConfigMap into a pod of the job's namespace, so it imports
nothing but the standard library.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import struct
from pathlib import Path
from typing import Any

_LISTEN = "0A"


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (IPv4 and IPv6)."""
    return {port for _, port in listening_sockets(pid)}


def _address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:  # /proc/net/tcp prints the address in host (little-endian) order
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    address = socket.inet_ntop(socket.AF_INET6, words)
    return address.removeprefix("::ffff:")  # an IPv4 address on a dual-stack socket (the JVM's)


def listening_sockets(pid: int) -> set[tuple[str, int]]:
    """The (bound address, port) pairs of the TCP sockets process `pid` listens on."""
    inodes = _socket_inodes(pid)
    found: set[tuple[str, int]] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == _LISTEN and fields[9] in inodes:
                    address, port = fields[1].rsplit(":", 1)
                    found.add((_address(address), int(port, 16)))
    return found


def running(pid: int) -> bool:
    """Whether `pid` is a live process; a zombie, ended but not yet reaped by its parent, is not."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def descendants(pid: int) -> set[int]:
    """`pid` and every process below it (a container's process tree, where there is no PID namespace)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in tree:
            tree.add(current)
            todo.extend(children.get(current, []))
    return tree


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class Touch:
    """Unpickling this creates `path`: proof that a pickle from the network was loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


class EndProcess:
    """Unpickling this ends the process that loads it at once, with exit status 86: a restart shows it."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (os._exit, (86,))


def attack_payloads(marker: Path, end_process: bool = False) -> dict[str, bytes]:
    evil = pickle.dumps(Touch(marker), protocol=5)
    # The same pickle behind a forged "handshake": 32 bytes of nonce and 32 of proof, all made up.
    forged_handshake = os.urandom(64) + struct.pack(">I", len(evil)) + evil
    extra = {}
    if end_process:
        deadly = pickle.dumps(EndProcess(), protocol=5)
        extra["process-ending pickle"] = struct.pack(">I", len(deadly)) + deadly
    return {
        **extra,
        "code-running pickle": struct.pack(">I", len(evil)) + evil,
        "garbage": os.urandom(8192),
        "half frame": b"\x00\x00",
        "4 GiB length header": struct.pack(">I", 0xFFFFFFFF) + b"A" * 4096,
        "forged handshake": forged_handshake,
        "nothing": b"",
    }


def attack(
    port: int, marker: Path, host: str = "127.0.0.1", timeout_s: float = 3.0, end_process: bool = False
) -> dict[str, bytes]:
    """Sends every attack to `port`, each on its own connection; returns what the port answered."""
    answers: dict[str, bytes] = {}
    for name, payload in attack_payloads(marker, end_process).items():
        with socket.create_connection((host, port), timeout=timeout_s) as conn:
            with contextlib.suppress(OSError):
                conn.sendall(payload)
            received = b""
            with contextlib.suppress(OSError):
                while len(received) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    received += chunk
            answers[name] = received
    return answers


# --- an attacker's pod ------------------------------------------------------------------------------------

# REST calls that would change the job, made without a token and with a wrong one.
_MUTATIONS = (
    ("POST", "/v1/job/cancel", b""),
    ("POST", "/v1/savepoints", b'{"stop": "terminate"}'),
    ("POST", "/v1/savepoints", b'{"targetDirectory": "file:///tmp/attacker-savepoint"}'),
    ("GET", "/v1/job", b""),  # the job's token guards reads too on Kubernetes (--rest-auth all)
)


def _rest_status(url: str, method: str, body: bytes, token: str | None) -> int:
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body or None, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def rest_attacks(base_url: str) -> list[dict[str, Any]]:
    """Every mutation (and a read) without credentials and with a made-up token: the status codes."""
    results = []
    for method, path, body in _MUTATIONS:
        for token in (None, os.urandom(32).hex()):
            status = _rest_status(base_url + path, method, body, token)
            results.append({"method": method, "path": path, "token": token is not None, "status": status})
    return results


def rogue_spark_executor(driver_host: str, driver_port: int, timeout_s: float = 90.0) -> dict[str, Any]:
    """Start a Spark executor of our own against the job's driver, without its secret.

    Joining would mean running the job's tasks (and being sent its code and data); a driver with
    `spark.authenticate` must refuse at the first RPC, before the executor learns anything.
    """
    import shutil
    import subprocess

    import pyspark  # the attacker uses the same image, hence the same Spark

    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java") or "java"
    jars = str(Path(pyspark.__file__).parent / "jars" / "*")
    command = [
        java,
        "-Xmx256m",
        "-cp",
        jars,
        "org.apache.spark.executor.CoarseGrainedExecutorBackend",
        "--driver-url",
        f"spark://CoarseGrainedScheduler@{driver_host}:{driver_port}",
        "--executor-id",
        "attacker",
        "--hostname",
        socket.gethostname(),
        "--cores",
        "1",
        "--app-id",
        "attacker",
        "--resourceProfileId",
        "0",
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as hung:
        output = (hung.stdout or b"") + (hung.stderr or b"")
        text = output.decode(errors="replace") if isinstance(output, bytes) else output
        return {"exitCode": None, "errors": _java_errors(text)}
    return {"exitCode": done.returncode, "errors": _java_errors(done.stdout + done.stderr)}


def _java_errors(text: str) -> list[str]:
    """The exception lines of a JVM's output (messages and causes, not the stack frames)."""
    lines = [line.strip() for line in text.splitlines()]
    return [
        line for line in lines if ("Exception" in line or "Error" in line) and not line.startswith("at ")
    ][:40]


def main(argv: list[str]) -> None:
    """The attacker pod's process: `probe.py PLAN_JSON`; prints one `ATTACK-REPORT {...}` line.

    PLAN: `sockets` [{host, port}] to send the wire attacks to (with the process-ending pickle too),
    `marker` the file the code-running pickle would create, `rest` the coordinator's base URL,
    `sparkDriver` {host, port} for a rogue executor.
    """
    import json
    from concurrent.futures import ThreadPoolExecutor

    plan = json.loads(argv[1])
    marker = Path(plan["marker"])
    report: dict[str, Any] = {"rest": [], "sparkExecutor": None}

    def attack_one(target: dict[str, Any]) -> dict[str, Any]:
        entry: dict[str, Any] = {"host": target["host"], "port": target["port"]}
        try:
            answers = attack(target["port"], marker, target["host"], end_process=True)
            entry["answered"] = {name: len(data) for name, data in answers.items()}
        except OSError as refused:  # refused or filtered (a NetworkPolicy) before any byte was sent
            entry["error"] = f"{type(refused).__name__}: {refused}"
        return entry

    # In parallel: a port that keeps a silent connection open costs the whole timeout per payload.
    with ThreadPoolExecutor(max_workers=16) as pool:
        report["sockets"] = list(pool.map(attack_one, plan.get("sockets", [])))
    if plan.get("rest"):
        report["rest"] = rest_attacks(plan["rest"])
    if plan.get("sparkDriver"):
        driver = plan["sparkDriver"]
        report["sparkExecutor"] = rogue_spark_executor(driver["host"], int(driver["port"]))
    print("ATTACK-REPORT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    import sys

    main(sys.argv)
