"""The dashboard in a real browser: Debian's chromium, headless, driven by Playwright, against a real job.

The job (tests/integration/pipelines/uneven.py) reads two splits of very different lengths with two
subtasks: one subtask finishes early and the other runs on, which is the FLIP-147 picture the page
must show (a FINISHED subtask beside a RUNNING one, checkpoints taken after it finished). The job runs
with `--rest-auth all`, so the page gets nothing without the token. The tests run in file order against
one job; the last one stops it from the page.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright

from testkit.checkpoints import PIPELINES
from testkit.jobs import SluiceJob

CHROMIUM = os.environ.get("SLUICE_TEST_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no browser at {CHROMIUM}: run scripts/install-system-deps.sh (it installs chromium)")
    with sync_playwright() as playwright:
        # Playwright's own browser builds cannot be downloaded here: drive the system's chromium.
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SluiceJob]:
    tmp = tmp_path_factory.mktemp("dashboard")
    job = SluiceJob(
        PIPELINES / "uneven.py",
        "--arg",
        f"out={tmp / 'out'}",
        "--arg",
        "short=100",
        "--arg",
        "long=10000000",
        "--arg",
        "rate=2000",
        "--parallelism",
        "2",
        "--checkpoint-dir",
        f"file://{tmp / 'chk'}",
        "--savepoint-dir",
        f"file://{tmp / 'sp'}",
        "--checkpoint-interval",
        "500ms",
        "--rest-auth",
        "all",
    )
    try:
        yield job
    finally:
        job.kill()


def _page(browser: Browser, problems: list[str]) -> Page:
    page = browser.new_page(viewport={"width": 1280, "height": 900})

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(message.text)

    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return page


def test_without_the_token_the_page_asks_for_it_and_a_token_in_the_fragment_leaves_the_address_bar(
    browser: Browser, job: SluiceJob
) -> None:
    url, token = job.rest_url(), job.token()
    problems: list[str] = []
    page = _page(browser, problems)
    page.goto(url + "/")
    expect(page.locator("#auth")).to_be_visible(timeout=10_000)
    expect(page.locator("#job-state")).to_have_text("?")  # nothing of the job was shown
    page.fill("#token-input", token)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#job-state")).to_have_text("RUNNING", timeout=10_000)
    expect(page.locator("#auth")).to_be_hidden()
    page.close()

    fresh = _page(browser, problems)
    fresh.goto(f"{url}/#token={token}")
    expect(fresh.locator("#job-state")).to_have_text("RUNNING", timeout=10_000)
    assert token not in fresh.url, "the token stays out of the address bar once read"
    fresh.close()
    # The first page's two refused reads (401) are the only errors; nothing broke the policy or the script.
    assert all("401" in p for p in problems), problems


def test_the_page_shows_a_finished_subtask_beside_a_running_one_and_live_rates(
    browser: Browser, job: SluiceJob
) -> None:
    problems: list[str] = []
    page = _page(browser, problems)
    page.goto(f"{job.rest_url()}/#token={job.token()}")
    source = page.locator('.vertex[data-vertex="0"]')
    expect(source.locator('.subtask[data-state="FINISHED"]')).to_have_count(1, timeout=30_000)
    expect(source.locator('.subtask[data-state="RUNNING"]')).to_have_count(1)
    expect(source).to_have_attribute("data-finished", "some")
    expect(source.locator(".vertex-meta")).to_contain_text("1 finished")
    # Rates update live: the long split is read at 2,000 records/s.
    expect(source.locator(".rate-in")).to_have_text(re.compile(r"^[12],\d{3}/s$"), timeout=15_000)
    # A checkpoint completed after the subtask finished counts it.
    expect(
        page.locator("#checkpoints tbody tr[data-status=COMPLETED] .finished-subtasks", has_text="1").first
    ).to_be_visible(timeout=15_000)
    # The graph has its edge and the page's figures agree with the REST API's.
    expect(page.locator("#edges path")).to_have_count(1)
    document: dict[str, Any] = job.get("/v1/job")
    assert document["vertices"][0]["finishedSubtasks"] == 1
    assert not problems, problems
    screenshot = os.environ.get("SLUICE_DASHBOARD_SCREENSHOT")
    if screenshot:  # how docs/images/dashboard.png is made
        page.screenshot(path=screenshot, full_page=True)
    page.close()


def test_stop_pressed_in_the_page_stops_the_job_with_a_savepoint(browser: Browser, job: SluiceJob) -> None:
    problems: list[str] = []
    page = _page(browser, problems)
    page.goto(f"{job.rest_url()}/#token={job.token()}")
    expect(page.locator("#btn-stop")).to_be_enabled(timeout=10_000)
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#btn-stop")
    expect(page.locator("#message")).to_contain_text("Stopped with savepoint", timeout=60_000)
    shown = page.locator("#last-savepoint").inner_text()
    assert job.wait(60) == 0, job.stderr
    page.close()
    savepoint = Path(shown.removeprefix("file://"))
    metadata = json.loads((savepoint / "_metadata").read_text())
    assert metadata["kind"] == "savepoint" and metadata["stopMode"] == "no-drain"
    assert f"FINISHED; savepoint {shown}" in job.stderr
