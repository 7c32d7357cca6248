"""A container's environment as the kubelet computes it: service variables, envFrom, env, downward API.

Values may refer to earlier variables as `$(NAME)` (`$$` escapes a dollar); the same expansion applies
to `command` and `args`. Missing ConfigMaps, Secrets or keys are a `ConfigError`, which the pod worker
reports as CreateContainerConfigError and retries, as the kubelet does.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Protocol

JsonDict = dict[str, Any]


class ConfigError(Exception):
    """A reference in the pod spec cannot be resolved (yet)."""


class ObjectSource(Protocol):
    async def configmap(self, name: str) -> JsonDict | None: ...

    async def secret(self, name: str) -> JsonDict | None: ...


def expand(text: str, env: Mapping[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "$" and text.startswith("$$", i):
            out.append("$")
            i += 2
        elif char == "$" and text.startswith("$(", i) and ")" in text[i + 2 :]:
            end = text.index(")", i + 2)
            name = text[i + 2 : end]
            out.append(env.get(name, text[i : end + 1]))
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def field_value(pod: JsonDict, path: str, pod_ip: str, host_ip: str) -> str:
    meta, spec = pod["metadata"], pod["spec"]
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return str(simple[path])
    match = _SUBSCRIPT.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{key}="{value}"' for key, value in sorted(items.items()))
    raise ConfigError(f"fieldRef {path!r} is not a downward-API field the process kubelet knows")


_SUFFIXES: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}


def parse_quantity(text: str) -> Decimal:
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix) and text[: -len(suffix)]:
            return Decimal(text[: -len(suffix)]) * Decimal(_SUFFIXES[suffix])
    return Decimal(text)


def resource_value(container: JsonDict, ref: JsonDict, node_allocatable: Mapping[str, str]) -> str:
    resource = ref["resource"]
    kind, _, name = resource.partition(".")
    declared = ((container.get("resources") or {}).get(kind) or {}).get(name)
    if declared is None:
        # Unset limits read as the node's allocatable amount, unset requests as zero (kubelet rule).
        declared = node_allocatable.get(name, "0") if kind == "limits" else "0"
    divisor = parse_quantity(str(ref.get("divisor") or "1"))
    return str(math.ceil(parse_quantity(str(declared)) / divisor))


def _decode_secret(secret: JsonDict, key: str) -> str | None:
    data = secret.get("data") or {}
    if key in data:
        return base64.b64decode(data[key]).decode()
    return (secret.get("stringData") or {}).get(key)


async def _key_ref(source: ObjectSource, ref: JsonDict, kind: str) -> str | None:
    name, key, optional = ref.get("name", ""), ref["key"], bool(ref.get("optional"))
    obj = await (source.configmap(name) if kind == "ConfigMap" else source.secret(name))
    if obj is None:
        if optional:
            return None
        raise ConfigError(f'{kind.lower()} "{name}" not found')
    value = (obj.get("data") or {}).get(key) if kind == "ConfigMap" else _decode_secret(obj, key)
    if value is None and not optional:
        raise ConfigError(f"couldn't find key {key} in {kind} {obj['metadata']['namespace']}/{name}")
    return value


async def container_env(
    pod: JsonDict,
    container: JsonDict,
    source: ObjectSource,
    base: Mapping[str, str],
    *,
    pod_ip: str,
    host_ip: str,
    node_allocatable: Mapping[str, str],
) -> dict[str, str]:
    """The container's variables on top of `base` (image and service variables), in Kubernetes order."""
    env = dict(base)
    for entry in container.get("envFrom") or []:
        env.update(await _env_from(entry, source))
    for entry in container.get("env") or []:
        name = entry["name"]
        if "valueFrom" not in entry:
            env[name] = expand(entry.get("value", ""), env)
            continue
        value_from = entry["valueFrom"]
        value: str | None
        if "fieldRef" in value_from:
            value = field_value(pod, value_from["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "resourceFieldRef" in value_from:
            value = resource_value(container, value_from["resourceFieldRef"], node_allocatable)
        elif "configMapKeyRef" in value_from:
            value = await _key_ref(source, value_from["configMapKeyRef"], "ConfigMap")
        elif "secretKeyRef" in value_from:
            value = await _key_ref(source, value_from["secretKeyRef"], "Secret")
        else:
            raise ConfigError(f"env {name}: valueFrom {sorted(value_from)} is not emulated")
        if value is not None:
            env[name] = value
    return env


async def _env_from(entry: JsonDict, source: ObjectSource) -> dict[str, str]:
    """One `envFrom` entry: every key of its ConfigMap or Secret, with the entry's prefix."""
    prefix = entry.get("prefix", "")
    found: dict[str, str] = {}
    for kind, field in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
        ref = entry.get(field)
        if ref is None:
            continue
        obj = await (source.configmap(ref["name"]) if kind == "ConfigMap" else source.secret(ref["name"]))
        if obj is None:
            if ref.get("optional"):
                continue
            raise ConfigError(f'{kind.lower()} "{ref["name"]}" not found')
        for key in obj.get("data") or {}:
            text = obj["data"][key] if kind == "ConfigMap" else _decode_secret(obj, key)
            found[prefix + key] = text or ""
    return found
