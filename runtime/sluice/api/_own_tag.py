"""Finds, before the job starts, a keyed function that sends `ctx.output` to its own `on_error` tag.

Which tag a `ctx.output(tag, value)` call names is a run-time value, so this cannot be decided in
general; the operator refuses such a record when it happens (`sluice.engine.operators.keyed`). What
can be seen before the start is the common way of writing it: a per-record method (or a method of the
function it calls through `self`, or a function nested in one) that loads the tag itself, as a module
global, a closure variable or an attribute of `self`. Loading the on_error tag there has no use but
sending to it, so that is refused when the pipeline is built. Anything else (a tag built inside the
method, reached through another object) is still caught at run time.
"""

from __future__ import annotations

import dis
import inspect
from collections.abc import Iterator
from types import CodeType, FunctionType
from typing import Any

from sluice.side_outputs import OutputTag

PER_RECORD_METHODS = (
    "process_element",
    "process_element1",
    "process_element2",
    "process_broadcast_element",
    "on_timer",
)


def refuse_output_to_own_tag(fn: object, on_error: object, operator: str) -> None:
    """Raises a ValueError when one of `fn`'s per-record methods names its `on_error` tag itself."""
    if not isinstance(on_error, OutputTag):
        return
    for method, tag in _tags_loaded(fn):
        if tag.name == on_error.name:
            raise ValueError(
                f"{operator}: {type(fn).__name__}.{method} uses OutputTag({tag.name!r}), which is this "
                "operator's on_error tag: its readers expect FailedRecord dead letters only, and "
                "ctx.output to it would fail the task. Send those records to an OutputTag of another name"
            )


def _tags_loaded(fn: object) -> Iterator[tuple[str, OutputTag]]:
    """(method name, tag) for every OutputTag a per-record method loads by name, following the
    methods it calls on `self` and the functions of its own module it calls."""
    home = type(fn).__module__
    seen: set[CodeType] = set()
    pending: list[tuple[str, FunctionType, bool]] = []
    for name in PER_RECORD_METHODS:
        method = inspect.getattr_static(type(fn), name, None)
        if isinstance(method, FunctionType):
            pending.append((name, method, True))
    while pending:
        name, function, is_method = pending.pop()
        for value, method in _loaded_values(fn, function, is_method, seen):
            if isinstance(value, OutputTag):
                yield name, value
            elif isinstance(value, FunctionType) and (method or value.__module__ == home):
                pending.append((f"{value.__name__} (called from {name})", value, method))


def _loaded_values(
    fn: object, function: FunctionType, is_method: bool, seen: set[CodeType]
) -> Iterator[tuple[Any, bool]]:
    """The values `function` (and the functions nested in it) load as globals and closure variables,
    and, for a method of `fn`, as attributes of `self`; with each, whether it is a method of `fn`."""
    code = function.__code__
    closure = _closure(function)
    self_name = code.co_varnames[0] if is_method and code.co_argcount else None
    codes = [code]
    while codes:
        current = codes.pop()
        if current in seen:
            continue
        seen.add(current)
        codes.extend(c for c in current.co_consts if isinstance(c, CodeType))
        previous: dis.Instruction | None = None
        for instruction in dis.get_instructions(current):
            op, name = instruction.opname, instruction.argval
            if op == "LOAD_GLOBAL" and isinstance(name, str):
                yield function.__globals__.get(name), False
            elif op == "LOAD_DEREF" and name in closure:
                yield closure[name], False
            elif (
                op in ("LOAD_ATTR", "LOAD_METHOD")
                and self_name is not None
                and current is code
                and previous is not None
                and previous.opname.startswith("LOAD_FAST")
                and previous.argval == self_name
            ):
                yield _attribute(fn, str(name))
            previous = instruction


def _closure(function: FunctionType) -> dict[str, Any]:
    """The values of `function`'s closure variables that are bound (a cell may still be empty)."""
    values = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=True):
        try:
            values[name] = cell.cell_contents
        except ValueError:
            continue
    return values


def _attribute(fn: object, name: str) -> tuple[Any, bool]:
    """`fn.name` without running a property or `__getattr__`, and whether it is a method of `fn` (a
    function of its class, given as that plain function)."""
    own = vars(fn).get(name) if hasattr(fn, "__dict__") else None
    if own is not None:
        return own, False
    found = inspect.getattr_static(type(fn), name, None)
    return found, isinstance(found, FunctionType)
