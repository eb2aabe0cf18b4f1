"""The page in a real browser: headless Chromium (Debian's chromium + chromium-driver) driven by Selenium.

The screenshot is kept as a test artifact in ``$IFQA_TEST_ARTIFACTS`` when set (CI's artifacts), else in
the test's temporary folder: a test run writes nothing into the checkout.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.serve.conftest import ANSWERS

GULF = next(iter(ANSWERS))


def _browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e .[dev])")
    binary = next(
        (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None
    )
    driver = shutil.which("chromedriver")
    if not binary or not driver:
        pytest.skip("no Chromium and chromedriver on PATH (Debian: apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


@pytest.fixture(scope="module")
def browser():
    driver = _browser()
    yield driver
    driver.quit()


def _wait_for(browser, condition, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout).until(condition)


def test_asking_a_question_shows_passages_and_an_answer(browser, reader_server, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(reader_server.url + "/")
    _wait_for(browser, lambda b: "fake-model" in b.find_element(By.ID, "setup").text)
    box = browser.find_element(By.ID, "question")
    box.clear()
    box.send_keys(GULF)
    browser.find_element(By.ID, "answer-button").click()
    _wait_for(browser, lambda b: b.find_element(By.ID, "prediction").text == "Florida")
    passages = browser.find_elements(By.CSS_SELECTOR, "#passages li.passage")
    assert len(passages) == 10
    assert browser.find_elements(By.CSS_SELECTOR, "#passages .badge.gold")  # a known question: gold flagged
    assert browser.find_elements(By.CSS_SELECTOR, "#passages mark")  # the question's words highlighted
    assert "Florida" in browser.find_element(By.ID, "known").text
    assert GULF in browser.find_element(By.ID, "queries").text
    assert "matches the reference" in browser.find_element(By.ID, "answer").text
    artifacts = Path(os.environ.get("IFQA_TEST_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(artifacts / "serve-page.png"))


def test_without_a_reader_the_page_searches_and_shows_the_command(browser, search_server):
    from selenium.webdriver.common.by import By

    browser.get(search_server.url + "/")
    _wait_for(browser, lambda b: "No reader configured" in b.find_element(By.ID, "setup").text)
    examples = _wait_for(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "#examples button.example"))
    examples[0].click()
    _wait_for(browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#passages li.passage")) == 10)
    browser.find_element(By.ID, "answer-button").click()
    _wait_for(browser, lambda b: "ifqa serve --model" in b.find_element(By.ID, "answer").text)
    box = browser.find_element(By.ID, "question")
    box.clear()
    box.send_keys("x" * 1001)
    browser.find_element(By.ID, "search-button").click()
    _wait_for(browser, lambda b: "longer than 1000 characters" in b.find_element(By.ID, "status").text)
