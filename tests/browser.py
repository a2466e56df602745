"""Headless Chromium (Debian's /usr/bin/chromium) through Playwright, for the browser tests,
and where they keep their screenshots (``var/screenshots/``, at 1280 px wide) for a person
to look at."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDTH = 1280
SCREENSHOTS = Path(__file__).resolve().parent.parent / "var" / "screenshots"

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Chromium from Debian's packages is not installed: apt-get install chromium",
)


def screenshot(page, name: str) -> Path:
    """A full-page screenshot under var/screenshots/ (made on first use)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def overflow(page) -> int:
    """How many pixels the page, or an admin list inside its scroll box, is wider than the
    room it has (0 when everything fits)."""
    return page.evaluate("""() => Math.max(
        document.documentElement.scrollWidth - window.innerWidth,
        ...[...document.querySelectorAll("#changelist .results")].map(
            box => box.scrollWidth - box.clientWidth))""")


@contextmanager
def chromium_page(monkeypatch) -> Iterator:
    """A Chromium page 1280 px wide (a test module's ``page`` fixture yields it). Playwright's sync API keeps an event loop running in this
    thread, so Django's guard against ORM calls from async code must be lifted for the test's
    own setup."""
    from playwright.sync_api import sync_playwright

    monkeypatch.setitem(os.environ, "DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": WIDTH, "height": 900})
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()
