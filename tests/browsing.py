"""Headless Chromium for the tests and for `make measure`: how it is started, and one page load
with every request to another host blocked and recorded."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[1] / "screenshots"
SIDEWAYS_SCROLL = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


def taking_screenshots() -> bool:
    """Screenshots are for people to look at, not checks: taken by `make screenshots` (SCREENSHOTS=1)."""
    return bool(os.environ.get("SCREENSHOTS"))


def screenshot(page, name: str) -> None:
    """The whole of ``page`` as ``screenshots/<name>.jpg``, when screenshots are being taken."""
    if taking_screenshots():
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=SCREENSHOTS / f"{name}.jpg", full_page=True, quality=80)


class Visit:
    """One page load, with every request to another host blocked and recorded."""

    def __init__(self, browser, base: str, path: str, **context_options):
        self.context = browser.new_context(**context_options)
        self.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        self.page = self.context.new_page()
        self.outside: list[str] = []
        self.console_errors: list[str] = []
        self.page.route("**/*", functools.partial(self._route, base))
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        self.page.on("pageerror", lambda e: self.console_errors.append(str(e)))
        self.page.goto(base + path, wait_until="load")  # scripts, styles and images are in
        self.page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        self.page.evaluate("() => MathJax.startup.promise.then(() => document.fonts.ready)")

    def _route(self, base, route):
        if route.request.url.startswith(base) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def close(self):
        self.context.close()
