"""Loads a user's pipeline file and builds its job graph, with one-line errors for the usual mistakes."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import traceback
from types import ModuleType

import cloudpickle

from sluice.api.environment import StreamEnvironment
from sluice.graph.jobgraph import GraphError, JobGraph, build_job_graph


class PipelineError(Exception):
    """A pipeline file that cannot be used; the message names the file and the problem."""


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def load_pipeline(path: str) -> ModuleType:
    """Loads a pipeline from a file path, or from an importable module name such as `jobs.orders`."""
    if not os.path.exists(path) and _MODULE_NAME.match(path) and not path.endswith(".py"):
        return _load_module(path)
    if not os.path.exists(path):
        raise PipelineError(f"{path}: no such pipeline file")
    if not os.path.isfile(path):
        raise PipelineError(f"{path}: is not a file; give the path of a Python file that defines build(env)")
    stem = os.path.splitext(os.path.basename(path))[0]
    name = f"sluice_pipeline_{''.join(c if c.isalnum() else '_' for c in stem)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PipelineError(f"{path}: cannot be loaded as a Python module (does it end in .py?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise PipelineError(f"{path}:{err.lineno}: syntax error: {err.msg}") from err
    except Exception as err:
        frame = traceback.extract_tb(err.__traceback__)[-1]
        raise PipelineError(
            f"{path}: failed to import: {type(err).__name__}: {err} "
            f"(at {os.path.basename(frame.filename)}:{frame.lineno})"
        ) from err
    _check_build(path, module)
    # The pipeline's functions travel to TaskManagers by value: they need not import the file.
    cloudpickle.register_pickle_by_value(module)
    return module


def _load_module(name: str) -> ModuleType:
    try:
        module = importlib.import_module(name)
    except ImportError as err:
        raise PipelineError(
            f"{name}: no such pipeline file, and no importable module of that name ({err})"
        ) from err
    except Exception as err:
        raise PipelineError(f"{name}: failed to import: {type(err).__name__}: {err}") from err
    _check_build(name, module)
    return module


def _check_build(path: str, module: ModuleType) -> None:
    build = getattr(module, "build", None)
    if build is None:
        raise PipelineError(f"{path}: defines no build(env) function; a pipeline file must define build(env)")
    if not callable(build):
        raise PipelineError(f"{path}: build is not a function; define build(env)")


def build_graph(path: str, env: StreamEnvironment) -> JobGraph:
    module = load_pipeline(path)
    try:
        module.build(env)
    except GraphError:
        raise
    except (KeyError, ValueError, TypeError) as err:
        frame = traceback.extract_tb(err.__traceback__)[-1]
        detail = (
            f"missing argument {err} (pass --arg {err.args[0]}=...)"
            if isinstance(err, KeyError)
            else str(err)
        )
        raise PipelineError(
            f"{path}: build(env) failed: {type(err).__name__}: {detail} "
            f"(at {os.path.basename(frame.filename)}:{frame.lineno})"
        ) from err
    stem = os.path.splitext(os.path.basename(path))[0].rsplit(".", 1)[-1]
    return build_job_graph(stem, env.nodes, env.parallelism, env.max_parallelism)
