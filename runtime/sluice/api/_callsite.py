"""Finds the line of the user's pipeline that called the API, for error messages."""

from __future__ import annotations

import os
import sys
from types import FrameType

_API_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_call_site() -> str:
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_API_DIR):
            return f"{os.path.basename(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return ""
