"""How the browser tests look at a page as its readers do: the two screens of the playground tests,
how far a page scrolls sideways, and the screenshots `make screenshots` keeps."""

from __future__ import annotations

import os

from sitelook.project import ROOT

DESKTOP = {"viewport": {"width": 1280, "height": 900}, "color_scheme": "light"}
PHONE = {
    "viewport": {"width": 375, "height": 800},
    "color_scheme": "light",
    "is_mobile": True,
    "has_touch": True,
}
SCREENSHOTS = ROOT / "screenshots"
SIDEWAYS_SCROLL = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


def taking_screenshots() -> bool:
    """Screenshots are for people to look at, not checks: taken by `make screenshots` (SCREENSHOTS=1)."""
    return bool(os.environ.get("SCREENSHOTS"))


def screenshot(page, name: str) -> None:
    """The whole of ``page`` as ``screenshots/<name>.jpg``, when screenshots are being taken."""
    if taking_screenshots():
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=SCREENSHOTS / f"{name}.jpg", full_page=True, quality=80)
