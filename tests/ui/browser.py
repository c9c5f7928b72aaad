"""``Browser``: Debian's Chromium, headless, driven through its chromedriver with Selenium.

Chromium is started so that it reaches nothing but the gateway under test (no sync, no
component updates, no background requests, no QUIC) with a profile of its own, and as root
without its sandbox (the test machine runs as root; the sandbox refuses to start there).

``wait`` and the helpers built on it wait for what a user would see (an element, a text), never
for a fixed time; a wait that fails saves a screenshot and says what the page showed and what
the browser logged.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.select import Select
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDTH, HEIGHT = 1280, 860
STALE_TRIES = 20  # a page that re-renders while it is read
WAIT_S = 20.0  # a busy test machine; a wait ends as soon as the page shows what it waits for

T = TypeVar("T")

QUIET_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--lang=en-US",
)


class Browser:
    """One headless Chromium for a test module; ``screenshots`` is where ``screenshot`` saves."""

    def __init__(self, screenshots: Path) -> None:
        missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
        if missing:
            raise RuntimeError(
                f"{', '.join(missing)} missing: install Debian's chromium and chromium-driver "
                "(`make system-packages` does)"
            )
        self.screenshots = screenshots
        self.profile = Path(tempfile.mkdtemp(prefix="chromium-profile-"))
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (*QUIET_FLAGS, f"--user-data-dir={self.profile}", f"--window-size={WIDTH},{HEIGHT}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # The driver's path given: Selenium Manager, which would download one, is never run.
        self.driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))

    def quit(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    # --- looking -------------------------------------------------------------------------

    def open(self, url: str) -> None:
        self.driver.get(url)

    def wait(self, condition: Callable[[], T | bool | None], what: str, timeout: float = WAIT_S) -> T:
        """What ``condition`` returns once it is truthy (elements that go stale are looked up again)."""

        def check(_: Any) -> T | bool | None:
            try:
                return condition()
            except StaleElementReferenceException:
                return None

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.05).until(check)  # type: ignore[no-any-return]
        except TimeoutException:
            shot = self.screenshot(f"failed-{re.sub(r'[^a-z0-9]+', '-', what.lower())[:60]}")
            raise AssertionError(
                f"waited {timeout:.0f} s for {what}; the page shows:\n{self.text('main')}\n"
                f"browser log: {self.log()}\nscreenshot: {shot}"
            ) from None

    def find(self, css: str) -> WebElement:
        return self.wait(lambda: self.visible(css), f"{css} to show")

    def visible(self, css: str) -> WebElement | None:
        def first() -> WebElement | None:
            for element in self.driver.find_elements(By.CSS_SELECTOR, css):
                if element.is_displayed():
                    return element
            return None

        return self._settled(first)

    def all(self, css: str) -> list[WebElement]:
        return [e for e in self.driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]

    def text(self, css: str) -> str:
        return self._settled(
            lambda: "\n".join(e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css))
        )

    @staticmethod
    def _settled(read: Callable[[], T]) -> T:
        """``read()``, looked up again while the page re-renders what it found under it (an element
        gone stale between finding it and reading it)."""
        for _ in range(STALE_TRIES - 1):
            try:
                return read()
            except StaleElementReferenceException:
                continue
        return read()

    def wait_text(self, css: str, expected: str | re.Pattern[str], timeout: float = WAIT_S) -> str:
        """The text of the first shown ``css`` element once it holds ``expected`` (a pattern: matches)."""

        def holds() -> str | None:
            element = self.visible(css)
            if element is None:
                return None
            text = element.text
            found = expected.search(text) if isinstance(expected, re.Pattern) else expected in text
            return text if found else None

        return self.wait(holds, f"{css} to show {expected!r}", timeout)

    def log(self) -> list[str]:
        """What the page logged since the last look (errors, CSP violations, console messages)."""
        return [f"{entry['level']} {entry['message']}" for entry in self.driver.get_log("browser")]

    # --- doing ---------------------------------------------------------------------------

    def fill(self, css: str, value: str) -> None:
        element = self.find(css)
        element.clear()
        element.send_keys(value)

    def set_value(self, css: str, value: str) -> None:
        """Sets a control's value as a script would (date pickers take no typing headless)."""
        self.driver.execute_script(
            "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('change'))",
            self.find(css),
            value,
        )

    def choose(self, css: str, value: str) -> None:
        Select(self.find(css)).select_by_value(value)

    def click(self, css: str) -> None:
        self.find(css).click()

    def screenshot(self, name: str, *, whole: bool = True) -> Path:
        """The whole page (the window made as tall as it is), or only its first screen, as
        ``<screenshots>/<name>.png``."""
        self.screenshots.mkdir(parents=True, exist_ok=True)
        path = self.screenshots / f"{name}.png"
        if not whole:
            self.driver.save_screenshot(str(path))
            return path
        height, chrome = self.driver.execute_script(
            "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]"
        )
        self.driver.set_window_size(WIDTH, max(HEIGHT, int(height) + int(chrome)))
        try:
            self.driver.save_screenshot(str(path))
        finally:
            self.driver.set_window_size(WIDTH, HEIGHT)
        return path
