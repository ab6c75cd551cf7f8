"""What a playground's view says about itself, and checks the three playgrounds' browser tests
share: the JSON state each script keeps in its root's ``data-state`` attribute, and accessibility
before and after a reader's change."""

from __future__ import annotations

import json

from sitelook.browsing import Tab, accessibility_violations
from tests.support.readers import DESKTOP

SETTLE_MS = 250  # a playground's live region speaks this long after the last change


def read_state(page, view: str) -> dict:
    """The state the script wrote on the element ``view`` (a CSS selector) of a Playwright page."""
    return json.loads(page.get_attribute(view, "data-state"))


def assert_accessible_before_and_after(browser, server, path: str, view: str, scheme: str, change) -> None:
    """No accessibility violation on the playground at ``path``, in ``scheme``, once its ``view``
    is drawn and again after ``change(page)``; nothing fetched from outside, no console error."""
    visit = Tab(browser, server, **{**DESKTOP, "color_scheme": scheme}).open(path)
    page = visit.page
    page.wait_for_selector(view)
    if scheme == "dark":
        page.wait_for_function("() => document.body.dataset.mdColorScheme === 'slate'")
    page.wait_for_timeout(SETTLE_MS + 50)
    assert accessibility_violations(page) == []
    change(page)
    assert accessibility_violations(page) == []
    assert visit.outside == [] and visit.console_errors == []
    visit.close()
