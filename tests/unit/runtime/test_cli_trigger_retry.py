"""`sluice savepoint` and `sluice stop` send a request id and send the same request again when the
answer is lost (issue 25): the coordinator answers a request id it has seen with that request's
trigger, so a broken connection neither loses the user's stop nor takes a second savepoint.

A fake coordinator on loopback reads each POST whole and then, as told, drops the connection without an
answer: the case where the request may or may not have been acted on."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from sluice import _client
from sluice._client import ClientError, client_command
from sluice.cli import parser

PATH = "file:///savepoints/savepoint-1"


class _Coordinator(BaseHTTPRequestHandler):
    posts: list[dict[str, Any]] = []
    drop_first = 0  # how many POSTs get no answer
    refuse = False  # answer every POST 409, as a coordinator with a savepoint in progress does
    triggers: dict[str, str] = {}

    def log_message(self, *_: object) -> None:
        pass

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).posts.append(body)
        # Acted on before the answer is lost: a repeat must get this trigger, not a new one.
        trigger = self.triggers.setdefault(body["requestId"], str(len(self.triggers) + 1))
        if self.refuse:
            self._answer(409, {"error": "savepoint 1 is still in progress; one at a time"})
            return
        if len(self.posts) <= self.drop_first:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self._answer(202, {"triggerId": trigger})

    def do_GET(self) -> None:
        if self.path.removeprefix("/v1/savepoints/") in self.triggers.values():
            self._answer(200, {"status": "COMPLETED", "path": PATH})
        elif self.path == "/v1/job":
            self._answer(200, {"state": "FINISHED"})
        else:
            self._answer(404, {"error": "no such route"})


@pytest.fixture
def coordinator(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    _Coordinator.posts, _Coordinator.triggers, _Coordinator.drop_first, _Coordinator.refuse = [], {}, 0, False
    monkeypatch.setattr("sluice._client.time.sleep", lambda _: None)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Coordinator)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("command", [["stop"], ["stop", "--drain"], ["savepoint"]])
def test_a_lost_answer_sends_the_same_request_again_and_follows_its_one_trigger(
    coordinator: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _Coordinator.drop_first = 2
    args = parser().parse_args([*command, "--address", coordinator, "--token", "t"])
    assert client_command(args) == 0
    assert capsys.readouterr().out.strip() == PATH
    first, *repeats = _Coordinator.posts
    assert len(repeats) == 2 and all(repeat == first for repeat in repeats), _Coordinator.posts
    assert re.fullmatch(r"cli-[0-9a-f]{32}", first["requestId"]), first
    expected_stop = (
        "terminate" if "--drain" in command else {"stop": "suspend", "savepoint": False}[command[0]]
    )
    assert first["stop"] == expected_stop
    assert len(_Coordinator.triggers) == 1


def test_each_command_has_its_own_request_id(coordinator: str, capsys: pytest.CaptureFixture[str]) -> None:
    for _ in range(2):
        assert (
            client_command(parser().parse_args(["savepoint", "--address", coordinator, "--token", "t"])) == 0
        )
    ids = [post["requestId"] for post in _Coordinator.posts]
    assert len(set(ids)) == 2, ids


def test_a_coordinator_that_never_answers_is_tried_a_bounded_number_of_times(coordinator: str) -> None:
    _Coordinator.drop_first = 1000
    args = parser().parse_args(["stop", "--address", coordinator, "--token", "t"])
    with pytest.raises(ClientError, match="cannot reach the coordinator"):
        client_command(args)
    assert len(_Coordinator.posts) == _client.TRIGGER_ATTEMPTS
    assert len({post["requestId"] for post in _Coordinator.posts}) == 1


def test_a_refusal_is_an_answer_and_is_not_sent_again(coordinator: str) -> None:
    _Coordinator.refuse = True
    args = parser().parse_args(["stop", "--address", coordinator, "--token", "t"])
    with pytest.raises(ClientError, match="409 savepoint 1 is still in progress"):
        client_command(args)
    assert len(_Coordinator.posts) == 1
