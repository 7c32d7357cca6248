"""The dashboard of a loopback job asks for the REST token when an action needs it, and keeps asking.

On loopback the page reads the job without a token (`--rest-auth mutations`), so its polls succeed
every second. Pressing Savepoint without a token shows the token form; the form must stay through those
successful polls until the user pastes the token, and the savepoint must then run and complete, as
docs/getting-started.md promises ("paste it when the page asks").
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect, sync_playwright

from testkit.checkpoints import PIPELINES
from testkit.jobs import SluiceJob

CHROMIUM = os.environ.get("SLUICE_TEST_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no browser at {CHROMIUM}: run scripts/install-system-deps.sh (it installs chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield browser
        browser.close()


def test_the_token_form_asked_for_by_savepoint_stays_until_pasted_and_the_savepoint_completes(
    browser: Browser, tmp_path: Path
) -> None:
    job = SluiceJob(
        PIPELINES / "uneven.py",
        "--arg",
        f"out={tmp_path / 'out'}",
        "--arg",
        "short=100",
        "--arg",
        "long=10000000",
        "--arg",
        "rate=2000",
        "--checkpoint-dir",
        f"file://{tmp_path / 'chk'}",
        "--savepoint-dir",
        f"file://{tmp_path / 'sp'}",
    )
    try:
        page = browser.new_page()
        page.goto(job.rest_url() + "/")
        # Reads need no token on loopback: the page shows the job at once.
        expect(page.locator("#job-state")).to_have_text("RUNNING", timeout=30_000)
        page.click("#btn-savepoint")
        form = page.locator("#auth")
        expect(form).to_be_visible()
        # Several polls succeed meanwhile (one a second); the form must not vanish under the user.
        polled = page.evaluate("() => new Promise((done) => setTimeout(() => done(true), 2500))")
        assert polled
        expect(form).to_be_visible()
        page.fill("#token-input", job.token())
        page.click("#token-form button[type=submit]")
        expect(page.locator("#message")).to_contain_text("Savepoint completed", timeout=60_000)
        expect(form).to_be_hidden()
        shown = page.locator("#last-savepoint").inner_text()
        assert shown.startswith(f"file://{tmp_path / 'sp'}"), shown
        assert (Path(shown.removeprefix("file://")) / "_metadata").is_file()
        page.close()
    finally:
        job.kill()
