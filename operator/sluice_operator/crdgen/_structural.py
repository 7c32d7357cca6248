"""Turn pydantic's JSON Schema into a structural OpenAPI v3 schema the kube-apiserver accepts.

The apiserver wants every node typed, no `$ref`, no `anyOf` that changes the type, and no
`additionalProperties: false` (it prunes unknown fields itself). Optional fields come out of pydantic as
`anyOf: [X, null]`; the apiserver prunes nulls of non-nullable fields, so X alone is the right schema.
"""

from __future__ import annotations

from typing import Any

_DROP = {"title", "$defs"}


def structural(schema: dict[str, Any]) -> dict[str, Any]:
    """A self-contained structural copy of `schema` (a pydantic `model_json_schema(by_alias=True)`)."""
    defs = schema.get("$defs", {})
    return _convert(schema, defs)


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is None:
        return node
    target = defs[ref.rsplit("/", 1)[-1]]
    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return _resolve(merged, defs)


def _collapse_any_of(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    options = [_resolve(option, defs) for option in node["anyOf"]]
    outer = {k: v for k, v in node.items() if k != "anyOf"}
    if outer.get("x-kubernetes-int-or-string"):
        return {k: v for k, v in outer.items() if k in ("description", "x-kubernetes-int-or-string")}
    typed = [option for option in options if option.get("type") != "null"]
    if len(typed) != 1:
        raise ValueError(f"cannot express anyOf {node['anyOf']} as a structural schema")
    merged = {**typed[0], **outer}
    if merged.get("default", 0) is None:
        del merged["default"]
    return merged


def _convert(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    node = _resolve(node, defs)
    if "anyOf" in node:
        node = _collapse_any_of(node, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "additionalProperties":
            if isinstance(value, dict):
                out[key] = _convert(value, defs)
            # `true` is spelled x-kubernetes-preserve-unknown-fields; `false` is the apiserver's default.
            continue
        if key == "properties":
            out[key] = {name: _convert(child, defs) for name, child in value.items()}
        elif key == "items":
            out[key] = _convert(value, defs)
        else:
            out[key] = value
    if out.get("x-kubernetes-preserve-unknown-fields"):
        out.pop("additionalProperties", None)
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        raise ValueError(f"schema node without a type: {node}")
    return out
