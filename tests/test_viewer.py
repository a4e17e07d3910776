"""The example service's viewer page (examples/service/viewer.html) in a real headless browser.

Debian's Chromium driven by its chromedriver through Selenium (``.ci/run`` installs
``chromium`` and ``chromium-driver`` with apt; nothing is downloaded at test time). The
service runs its in-memory demo dataset; the test reads the canvas's pixels back and
compares them with the data the tiles were drawn from.
"""

from __future__ import annotations

import concurrent.futures
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from service_server import ServiceProcess

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",  # root in a VM
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    # A closed network: no background connections to refuse, no component updates.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--window-size=1000,800",
)


def demo_field() -> np.ndarray[Any, Any]:
    """The demo dataset's ``temperature`` (examples/service/app.py ``_demo_store``), step 0."""
    y, x = np.mgrid[0:512, 0:512].astype("f4") / 64
    t0 = np.float32(0)
    return np.asarray(np.sin(x + t0) * np.cos(y) * 20 + 280, dtype="f4")


def gray(value: float) -> int:
    """The tile endpoint's grey level of ``value`` with the demo's valid_range [260, 300]."""
    return int(np.clip((value - 260) / 40, 0, 1) * 255)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[ServiceProcess, webdriver.Chrome]]:
    """The service on its demo dataset (no datasets configured) and a headless Chromium,
    started side by side: each takes seconds, mostly waiting."""
    if not shutil.which(CHROMEDRIVER):
        pytest.fail(
            f"{CHROMEDRIVER} is missing: apt-get install chromium chromium-driver (what .ci/run does)"
        )
    options = Options()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="azarr-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        starting = pool.submit(ServiceProcess, {})
        try:
            driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        except BaseException:
            if starting.exception() is None:
                starting.result().stop()
            shutil.rmtree(profile, ignore_errors=True)
            raise
        try:
            server = starting.result()
        except BaseException:
            driver.quit()
            shutil.rmtree(profile, ignore_errors=True)
            raise
    try:
        yield server, driver
    finally:
        driver.quit()
        server.stop()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def svc(served: tuple[ServiceProcess, webdriver.Chrome]) -> ServiceProcess:
    return served[0]


@pytest.fixture(scope="module")
def browser(served: tuple[ServiceProcess, webdriver.Chrome]) -> webdriver.Chrome:
    return served[1]


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def pixel(driver: webdriver.Chrome, x: int, y: int) -> list[int]:
    """RGBA of the canvas at (x, y)."""
    rgba: list[int] = driver.execute_script(
        "return Array.from(document.getElementById('view').getContext('2d').getImageData(arguments[0],"
        " arguments[1], 1, 1).data);",
        x,
        y,
    )
    return rgba


def settled(driver: webdriver.Chrome) -> bool:
    body = driver.find_element(By.TAG_NAME, "body")
    return body.get_attribute("data-ready") == "true" and body.get_attribute("data-pending") == "0"


def test_viewer_browses_and_renders_tiles(svc: ServiceProcess, browser: webdriver.Chrome) -> None:
    field = demo_field()
    browser.get(svc.url + "/")
    wait_for(lambda: settled(browser) and pixel(browser, 10, 10)[3] == 255, "the first tiles")
    assert browser.find_element(By.ID, "dataset").get_attribute("value") == "demo"
    assert browser.find_element(By.ID, "array").get_attribute("value") == "temperature"
    assert browser.find_element(By.ID, "error").get_attribute("hidden") is not None
    # z = 0: one canvas pixel per element; four tiles cover the 512 x 512 grid.
    for row, col in ((10, 10), (100, 300), (400, 260), (511, 511)):
        r, g, b, a = pixel(browser, col, row)
        assert a == 255 and r == g == b and abs(r - gray(field[row, col])) <= 1, (
            row,
            col,
            r,
            gray(field[row, col]),
        )
    assert pixel(browser, 600, 100)[3] == 0  # past the array's last column: nothing drawn

    # Zoom out: each pixel is 2 x 2 elements (the tile endpoint's step-2 sample).
    browser.find_element(By.ID, "zoom-out").click()
    wait_for(lambda: settled(browser) and "z = 1" in browser.find_element(By.ID, "zoom").text, "zoom 1")
    r, _, _, a = wait_for(lambda: (p := pixel(browser, 50, 40))[3] == 255 and p, "the zoomed tile")
    assert abs(r - gray(field[80, 100])) <= 1
    assert pixel(browser, 300, 100)[3] == 0  # 512 elements are now 256 pixels wide

    # Pan: drag the map 100 px left and 50 px up; at z = 1 that is 200 and 100 elements.
    canvas = browser.find_element(By.ID, "view")
    ActionChains(browser).move_to_element_with_offset(canvas, 0, 0).click_and_hold().move_by_offset(
        -100, -50
    ).release().perform()
    wait_for(lambda: settled(browser), "the panned tiles")
    r, _, _, a = wait_for(lambda: (p := pixel(browser, 50, 40))[3] == 255 and p, "the panned tile")
    assert abs(r - gray(field[80 + 100, 100 + 200])) <= 1


def test_viewer_shows_the_error_of_a_bad_dataset(svc: ServiceProcess, browser: webdriver.Chrome) -> None:
    browser.get(svc.url + "/?dataset=nope")
    error = browser.find_element(By.ID, "error")
    wait_for(lambda: error.get_attribute("hidden") is None, "the error message")
    # The service's reason, as its 404 said it: "no dataset named 'nope'; known: demo".
    assert error.text.startswith("dataset nope: no dataset named 'nope'"), error.text
    assert pixel(browser, 10, 10)[3] == 0  # nothing drawn
