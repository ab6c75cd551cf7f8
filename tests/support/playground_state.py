"""What a playground's view says about itself: the JSON state each script keeps in its root's
``data-state`` attribute (the browser tests of the three playgrounds)."""

from __future__ import annotations

import json


def read_state(page, view: str) -> dict:
    """The state the script wrote on the element ``view`` (a CSS selector) of a Playwright page."""
    return json.loads(page.get_attribute(view, "data-state"))
