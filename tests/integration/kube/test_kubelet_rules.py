"""The process kubelet's pure rules (no API server): Docker command semantics, $(VAR) expansion, phases."""

from __future__ import annotations

import pytest

from testkit.kubelet._env import expand, parse_quantity, resource_value
from testkit.kubelet._images import ImageError, ImageSpec, container_argv, resolve_image
from testkit.kubelet._ips import IpPool
from testkit.kubelet._status import ContainerRecord, pod_phase

_IMAGE = ImageSpec(entrypoint=("/bin/sh", "-c"), cmd=("echo default",))


@pytest.mark.parametrize(
    ("command", "args", "argv"),
    [
        (None, None, ["/bin/sh", "-c", "echo default"]),
        (None, ["echo args"], ["/bin/sh", "-c", "echo args"]),
        (["/bin/echo"], None, ["/bin/echo"]),
        (["/bin/echo"], ["a", "b"], ["/bin/echo", "a", "b"]),
    ],
)
def test_command_replaces_the_entrypoint_and_args_replace_cmd(
    command: list[str] | None, args: list[str] | None, argv: list[str]
) -> None:
    assert container_argv(_IMAGE, command, args) == argv


def test_a_missing_executable_is_a_clear_image_error() -> None:
    with pytest.raises(ImageError, match=r"/no/such/tool.*does not exist"):
        container_argv(_IMAGE, ["/no/such/tool"], None)


def test_images_match_by_pattern_in_order() -> None:
    images = {"registry.test/special:*": _IMAGE, "*": ImageSpec(entrypoint=("/bin/true",))}

    assert resolve_image(images, "registry.test/special:v1") is _IMAGE
    assert resolve_image(images, "other:v1").entrypoint == ("/bin/true",)
    with pytest.raises(ImageError, match="matches no entry"):
        resolve_image({"a": _IMAGE}, "b")


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)-$(B)", "1-2"),
        ("$$(A)", "$(A)"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),
        ("$A and $(A", "$A and $(A"),
        ("$$$(A)", "$1"),
    ],
)
def test_variable_references_expand_like_kubernetes(text: str, expanded: str) -> None:
    assert expand(text, {"A": "1", "B": "2"}) == expanded


def test_resource_field_refs_use_declared_values_or_node_capacity() -> None:
    container = {"resources": {"limits": {"memory": "1Gi"}, "requests": {"cpu": "250m"}}}

    assert resource_value(container, {"resource": "limits.memory", "divisor": "1Mi"}, {}) == "1024"
    assert resource_value(container, {"resource": "requests.cpu", "divisor": "1m"}, {}) == "250"
    assert (
        resource_value(container, {"resource": "requests.cpu"}, {}) == "1"
    )  # rounded up, as the kubelet does
    assert resource_value(container, {"resource": "limits.cpu"}, {"cpu": "2"}) == "2"
    assert parse_quantity("1.5G") == 1_500_000_000


def _record(state: dict[str, object], done: bool = False) -> ContainerRecord:
    record = ContainerRecord("c", "image", state=dict(state))
    record.done = done
    return record


def test_pod_phase_follows_the_container_states() -> None:
    waiting = _record({"waiting": {"reason": "ContainerCreating"}})
    running = _record({"running": {}})
    ok = _record({"terminated": {"exitCode": 0}}, done=True)
    failed = _record({"terminated": {"exitCode": 2}}, done=True)

    assert pod_phase([], [waiting], started=True) == "Pending"
    assert pod_phase([], [running], started=False) == "Pending"
    assert pod_phase([], [running, ok], started=True) == "Running"
    assert pod_phase([], [ok, ok], started=True) == "Succeeded"
    assert pod_phase([], [ok, failed], started=True) == "Failed"
    assert pod_phase([failed], [waiting], started=True) == "Failed"
    assert pod_phase([_record({"running": {}})], [waiting], started=True) == "Pending"


def test_pod_ips_are_distinct_loopback_addresses() -> None:
    pool = IpPool("127.42.0.0/16")
    addresses = [pool.allocate() for _ in range(600)]

    assert len(set(addresses)) == 600
    assert all(a.startswith("127.42.") and not a.endswith((".0", ".255")) for a in addresses)
    with pytest.raises(ValueError, match="loopback"):
        IpPool("10.0.0.0/24")
