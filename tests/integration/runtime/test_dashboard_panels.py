"""The dashboard shows what a first user looked for and did not find: the exception history, the
TaskManagers, the watermark itself (a lag only for event time that is wall-clock time), and a Cancel
button, which on loopback asks for the token when pressed and then cancels the job."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from testkit.jobs import REPO, SluiceJob

CHROMIUM = os.environ.get("SLUICE_TEST_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no browser at {CHROMIUM}: run scripts/install-system-deps.sh (it installs chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield browser
        browser.close()


def test_exceptions_taskmanagers_watermark_and_cancel(browser: Browser, tmp_path: Path) -> None:
    # Event time is the record's number in ms (as in the docs' pipelines): a watermark, not a lag.
    job = SluiceJob(
        REPO / "examples" / "unbounded_counts.py",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "rate=2000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--checkpoint-interval",
        "500ms",
        "--restart-delay",
        "200ms",
    )
    try:
        job.wait_checkpoints(1)
        lost = job.taskmanager_pids()[0]
        os.kill(lost, signal.SIGKILL)
        job.wait_until(lambda: job.get("/v1/job")["restarts"] >= 1, what="a restart")
        job.wait_until(lambda: job.get("/v1/job")["state"] == "RUNNING", what="running again")
        document = job.get("/v1/job")

        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(job.rest_url() + "/")
        expect(page.locator("#job-state")).to_have_text("RUNNING", timeout=30_000)
        failures = page.locator("#exceptions tbody tr")
        expect(failures).to_have_count(len(document["exceptions"]), timeout=10_000)
        expect(failures.first).to_contain_text(document["exceptions"][0]["error"])
        rows = page.locator("#taskmanagers tbody tr")
        expect(rows).to_have_count(len(document["taskManagers"]), timeout=10_000)
        for tm in document["taskManagers"]:
            expect(page.locator(f'#taskmanagers tr[data-index="{tm["index"]}"]')).to_contain_text(
                str(tm["pid"])
            )
        source = page.locator('.vertex[data-vertex="1"]')
        expect(source.locator(".watermark")).to_have_text(re.compile(r"^\d{1,3}(,\d{3})*$"), timeout=15_000)
        expect(source.locator(".watermark-lag")).to_have_count(0)
        assert page.locator("#restored-from").inner_text().startswith("checkpoint ")

        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#btn-cancel")
        expect(page.locator("#auth")).to_be_visible()
        page.fill("#token-input", job.token())
        page.click("#token-form button[type=submit]")
        assert job.wait(60) == 1, job.stderr
        page.close()
    finally:
        job.kill()
    assert "CANCELED: canceled by request" in job.stderr.strip().splitlines()[-1]
