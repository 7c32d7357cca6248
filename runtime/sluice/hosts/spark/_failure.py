"""One readable line from the exception a failed or cancelled TaskManager stage raises in the driver.

Spark's message runs to pages: the abort reason, then the failed task's Java stack and, for Python
tasks, the worker's traceback. The coordinator's log and `GET /v1/job` `error` need the gist: why the
stage ended, and the Python or Java exception behind it.
"""

from __future__ import annotations

import re

_ABORTED = "Job aborted due to stage failure: "
_REASON = re.compile(r"Most recent failure reason: (.*)")
# The last line of a Python traceback ("module.Error: message") or a Java exception line.
_EXCEPTION = re.compile(r"^((?:[\w.]+\.)?\w*(?:Error|Exception|Exited|Interrupt)(?::.*)?)$")
_LIMIT = 600


def describe_failure(err: BaseException) -> str:
    java = getattr(err, "java_exception", None)
    text = _java_message(java) if java is not None else f"{type(err).__name__}: {err}"
    return describe_message(text)


def _java_message(java: object) -> str:
    try:
        return str(java.getMessage())  # type: ignore[attr-defined]
    except Exception:  # the JVM may be gone already
        return str(java)


def describe_message(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "no reason given"
    head = lines[0].removeprefix(_ABORTED)
    reason = _REASON.search(head)
    if reason is not None:
        head = reason.group(1)
    causes = [line for line in lines[1:] if _EXCEPTION.match(line) and not line.startswith("at ")]
    summary = head if not causes else f"{head} ({_cause(causes)})"
    return summary if len(summary) <= _LIMIT else summary[: _LIMIT - 1] + "…"


def _cause(causes: list[str]) -> str:
    # A Python traceback ends with the exception that was raised; prefer it to Spark's wrappers.
    python = [c for c in causes if not c.startswith(("org.apache.", "java.", "py4j."))]
    return (python or causes)[-1]
