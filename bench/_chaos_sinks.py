"""The sinks a chaos run writes to: what the job is told, what it should write, what it left behind.

- file:     FileSink on local disk (tests/integration/pipelines/generated_counts.py), checkpoints too;
- s3:       the same pipeline with its output, checkpoints and savepoints on the moto S3 server, reached
            through the fault-injecting proxy when there is one;
- postgres: PostgresSink (tests/integration/pipelines/postgres_counts.py) into a fresh database;
            checkpoints on local disk.

With the side-output pipeline (file and s3 only) the output directory holds four sinks' directories;
bench/_chaos_side_outputs.py reads and checks them as one multiset.

Leftovers: hidden (in-progress or pre-committed, never published) files under a FileSink's output
directory, and prepared transactions still open in the run's database once the job has ended.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
from pathlib import Path
from typing import Any

import _chaos_side_outputs as side_outputs
from _chaos_scenario import Scenario
from _chaos_services import Services
from testkit.outputs import keyed_window_reference, read_output
from testkit.s3 import client_env

TABLE = "counts"


class Sink:
    checkpoint_dir = ""
    savepoint_dir = ""

    def __init__(self, scenario: Scenario, services: Services, workdir: Path, proxy: Any) -> None:
        self.scenario = scenario
        self.services = services
        self.workdir = workdir
        self.proxy = proxy
        self.checkpoint_dir = f"file://{workdir / 'chk'}"
        self.savepoint_dir = f"file://{workdir / 'sp'}"

    def args(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return {}

    def prepare(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)

    def output(self) -> collections.Counter[str]:
        if self.scenario.pipeline == "side-outputs":
            return side_outputs.rows(self.read)
        return self.read("")

    def read(self, directory: str) -> collections.Counter[str]:
        """The published rows under the output's sub-`directory` ("" for the output itself)."""
        raise NotImplementedError

    def reference(self) -> collections.Counter[str]:
        sc = self.scenario
        if sc.pipeline == "side-outputs":
            return side_outputs.reference(sc.count)
        return keyed_window_reference(sc.count, sc.keys, 1000, 10)

    def prepared(self) -> list[str]:
        return []

    def stray_files(self) -> list[str]:
        return []

    def cleanup(self, keep: bool) -> None:
        if not keep:
            shutil.rmtree(self.workdir, ignore_errors=True)


class LocalFiles(Sink):
    @property
    def out(self) -> Path:
        return self.workdir / "out"

    def args(self) -> list[str]:
        return ["--arg", f"out={self.out}"]

    def read(self, directory: str) -> collections.Counter[str]:
        return read_output(f"file://{self.out / directory}")

    def stray_files(self) -> list[str]:
        if not self.out.exists():
            return []
        return sorted(str(p) for p in self.out.rglob(".*"))


class S3Files(Sink):
    def __init__(self, scenario: Scenario, services: Services, workdir: Path, proxy: Any) -> None:
        super().__init__(scenario, services, workdir, proxy)
        self.bucket = f"chaos-{scenario.seed}-{scenario.run}".lower()
        self.checkpoint_dir = f"s3://{self.bucket}/chk"
        self.savepoint_dir = f"s3://{self.bucket}/sp"

    def args(self) -> list[str]:
        return ["--arg", f"out=s3://{self.bucket}/out"]

    def env(self) -> dict[str, str]:
        server = self.services.s3()
        endpoint = self.proxy.endpoint_url if self.proxy is not None else server.endpoint_url
        # A developer's own AWS configuration must not redirect or re-credential the job's clients.
        return {
            **client_env(endpoint),
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def prepare(self) -> None:
        super().prepare()
        self.services.s3().create_bucket(self.bucket)

    def read(self, directory: str) -> collections.Counter[str]:
        # Read straight from the server, never through the proxy (its faults are for the job only).
        path = f"s3://{self.bucket}/out" + (f"/{directory}" if directory else "")
        return read_output(path, self.services.s3().storage_options)

    def stray_files(self) -> list[str]:
        fs = self.services.s3().filesystem()
        root = f"{self.bucket}/out"
        if not fs.exists(root):
            return []
        return sorted(f"s3://{p}" for p in fs.find(root) if p.rsplit("/", 1)[-1].startswith("."))


class Postgres(Sink):
    def __init__(self, scenario: Scenario, services: Services, workdir: Path, proxy: Any) -> None:
        super().__init__(scenario, services, workdir, proxy)
        self.database = f"chaos_{scenario.seed}_{scenario.run}"

    def args(self) -> list[str]:
        dsn = self.services.postgres().dsn_for(self.database)
        return ["--arg", f"dsn={dsn}", "--arg", f"table={TABLE}"]

    def prepare(self) -> None:
        super().prepare()
        server = self.services.postgres()
        server.drop_database(self.database)  # a replayed run starts from nothing
        server.create_database(self.database)
        server.execute(f"CREATE TABLE {TABLE} (k int, win int, n int, total bigint)", dbname=self.database)

    def output(self) -> collections.Counter[str]:
        rows = self.services.postgres().execute(f"SELECT k, win, n, total FROM {TABLE}", dbname=self.database)
        return collections.Counter(json.dumps(list(row)) for row in rows)

    def reference(self) -> collections.Counter[str]:
        sc = self.scenario
        acc: dict[tuple[int, int], tuple[int, int]] = {}
        for i in range(sc.count):
            n, total = acc.get((i % sc.keys, i // 1000), (0, 0))
            acc[(i % sc.keys, i // 1000)] = (n + 1, total + i)
        return collections.Counter(json.dumps([k, w, n, t]) for (k, w), (n, t) in acc.items())

    def prepared(self) -> list[str]:
        rows = self.services.postgres().execute(
            "SELECT gid FROM pg_prepared_xacts WHERE database = %s", [self.database]
        )
        return sorted(str(gid) for (gid,) in rows)

    def cleanup(self, keep: bool) -> None:
        super().cleanup(keep)
        if not keep:
            self.services.postgres().drop_database(self.database)


def make_sink(scenario: Scenario, services: Services, workdir: Path, proxy: Any) -> Sink:
    kinds: dict[str, type[Sink]] = {"file": LocalFiles, "s3": S3Files, "postgres": Postgres}
    return kinds[scenario.sink](scenario, services, workdir, proxy)
