"""A TaskManager process sets up Python's garbage collector for record batches: a larger young
generation, and what start-up created frozen out of later collections."""

from __future__ import annotations

import json
import subprocess
import sys

from sluice.engine._collector import YOUNG_GENERATION

_REPORT = """
import gc, json
from sluice.engine._collector import tune_for_records
before = gc.get_threshold()
tune_for_records()
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def test_the_young_generation_grows_and_start_up_objects_are_frozen() -> None:
    # In a process of its own: the settings are process-wide, and this test's process is pytest's.
    done = subprocess.run([sys.executable, "-c", _REPORT], capture_output=True, text=True, check=True)
    report = json.loads(done.stdout)
    assert report["after"][0] == YOUNG_GENERATION > report["before"][0]
    assert report["after"][1:] == report["before"][1:], "the older generations keep Python's settings"
    assert report["frozen"] > 1000, "the modules imported so far are out of the collector's walks"
