"""Pod volumes materialised as directories under the pod's state directory.

ConfigMap, Secret, downward-API and projected volumes (including service-account tokens, which the
ServiceAccount admission plugin injects into every pod) are written once when the pod starts; later
changes to the source objects are not propagated. emptyDir is an empty directory, hostPath is the host
path itself. Each container then sees its volumeMounts through bind mounts (see `_enter.py`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ._env import ConfigError, ObjectSource, field_value, resource_value

JsonDict = dict[str, Any]
_DEFAULT_MODE = 0o644


class TokenSource(Protocol):
    async def token(self, audience: str | None, expiration_seconds: int) -> str: ...


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "read_only": self.read_only}


@dataclass
class _Context:
    pod: JsonDict
    objects: ObjectSource
    tokens: TokenSource
    pod_ip: str
    host_ip: str
    node_allocatable: Mapping[str, str]


def _write(directory: Path, relative: str, content: bytes, mode: int) -> None:
    if relative.startswith("/") or ".." in Path(relative).parts:
        raise ConfigError(f"volume item path {relative!r} must be relative and stay inside the volume")
    path = directory / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.chmod(mode)


def _key_values(obj: JsonDict, is_secret: bool) -> dict[str, bytes]:
    values = (
        {key: value.encode() for key, value in (obj.get("data") or {}).items()}
        if not is_secret
        else {key: base64.b64decode(value) for key, value in (obj.get("data") or {}).items()}
    )
    for key, value in (obj.get("binaryData") or {}).items():
        values[key] = base64.b64decode(value)
    return values


async def _project_keys(ctx: _Context, directory: Path, source: JsonDict, is_secret: bool, mode: int) -> None:
    name = source.get("secretName" if is_secret and "secretName" in source else "name", "")
    kind = "secret" if is_secret else "configmap"
    obj = await (ctx.objects.secret(name) if is_secret else ctx.objects.configmap(name))
    if obj is None:
        if source.get("optional"):
            return
        raise ConfigError(f'MountVolume.SetUp failed: {kind} "{name}" not found')
    values = _key_values(obj, is_secret)
    items = source.get("items")
    if items is None:
        for key, content in values.items():
            _write(directory, key, content, mode)
        return
    for item in items:
        if item["key"] not in values:
            if source.get("optional"):
                continue
            raise ConfigError(f'MountVolume.SetUp failed: {kind} "{name}" has no key {item["key"]!r}')
        _write(directory, item["path"], values[item["key"]], item.get("mode", mode))


async def _downward(ctx: _Context, directory: Path, source: JsonDict, mode: int) -> None:
    for item in source.get("items") or []:
        if "fieldRef" in item:
            value = field_value(ctx.pod, item["fieldRef"]["fieldPath"], ctx.pod_ip, ctx.host_ip)
        else:
            ref = item["resourceFieldRef"]
            containers = {c["name"]: c for c in ctx.pod["spec"]["containers"]}
            value = resource_value(containers[ref["containerName"]], ref, ctx.node_allocatable)
        _write(directory, item["path"], value.encode(), item.get("mode", mode))


async def _fill(ctx: _Context, name: str, volume: JsonDict, directory: Path) -> Path:
    if "emptyDir" in volume:
        return directory
    if "hostPath" in volume:
        host = Path(volume["hostPath"]["path"])
        if volume["hostPath"].get("type") == "DirectoryOrCreate":
            host.mkdir(parents=True, exist_ok=True)
        return host
    if "configMap" in volume or "secret" in volume:
        is_secret = "secret" in volume
        source = volume["secret" if is_secret else "configMap"]
        await _project_keys(ctx, directory, source, is_secret, source.get("defaultMode", _DEFAULT_MODE))
        return directory
    if "downwardAPI" in volume:
        source = volume["downwardAPI"]
        await _downward(ctx, directory, source, source.get("defaultMode", _DEFAULT_MODE))
        return directory
    if "projected" in volume:
        await _projected(ctx, name, volume["projected"], directory)
        return directory
    kinds = sorted(key for key in volume if key != "name")
    raise ConfigError(f"volume {name}: volume type {kinds} is not emulated by the process kubelet")


async def _projected(ctx: _Context, name: str, projected: JsonDict, directory: Path) -> None:
    mode = projected.get("defaultMode", _DEFAULT_MODE)
    for source in projected.get("sources") or []:
        if "configMap" in source or "secret" in source:
            is_secret = "secret" in source
            await _project_keys(
                ctx, directory, source["secret" if is_secret else "configMap"], is_secret, mode
            )
        elif "downwardAPI" in source:
            await _downward(ctx, directory, source["downwardAPI"], mode)
        elif "serviceAccountToken" in source:
            spec = source["serviceAccountToken"]
            token = await ctx.tokens.token(spec.get("audience"), int(spec.get("expirationSeconds", 3600)))
            _write(directory, spec["path"], token.encode(), mode)
        else:
            raise ConfigError(f"volume {name}: projected source {sorted(source)} is not emulated")


async def prepare_volumes(
    pod: JsonDict,
    root: Path,
    objects: ObjectSource,
    tokens: TokenSource,
    *,
    pod_ip: str,
    host_ip: str,
    node_allocatable: Mapping[str, str],
) -> dict[str, Path]:
    """Write every volume of the pod under `root`; returns volume name -> host directory."""
    ctx = _Context(pod, objects, tokens, pod_ip, host_ip, node_allocatable)
    result: dict[str, Path] = {}
    for volume in pod["spec"].get("volumes") or []:
        directory = root / volume["name"]
        directory.mkdir(parents=True, exist_ok=True)
        result[volume["name"]] = await _fill(ctx, volume["name"], volume, directory)
    return result


_ALWAYS_READ_ONLY = ("configMap", "secret", "downwardAPI", "projected")


def container_mounts(pod: JsonDict, container: JsonDict, volumes: Mapping[str, Path]) -> list[Mount]:
    kinds = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    mounts = []
    for mount in container.get("volumeMounts") or []:
        name = mount["name"]
        if name not in volumes:
            raise ConfigError(f"volumeMount {name!r} refers to no volume of the pod")
        source = volumes[name]
        if mount.get("subPath"):
            source = source / mount["subPath"]
            if not source.exists():
                source.mkdir(parents=True)
        read_only = bool(mount.get("readOnly")) or any(k in kinds[name] for k in _ALWAYS_READ_ONLY)
        mounts.append(Mount(str(source), mount["mountPath"], read_only))
    return mounts
