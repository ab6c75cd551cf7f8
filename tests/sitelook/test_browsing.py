"""sitelook/browsing.py's reading of a page, on small pages whose layout is set in pixels."""

from __future__ import annotations

import pytest

from sitelook.browsing import reading

pytestmark = pytest.mark.browser

SCREEN = 800
PAGE = """<!doctype html><html><head><style>
  body {{ margin: 0; display: flex; align-items: flex-start; }}
  nav {{ width: 240px; height: {nav}px; }}
  article {{ width: 700px; height: {article}px; margin: 0; padding: 0; }}
</style></head><body><nav>The site's pages</nav><article><p>A lesson.</p></article></body></html>"""


@pytest.mark.parametrize(
    ("nav", "article"),
    [(3000, 400), (100, 2400)],
    ids=["navigation taller than the article", "article taller than the navigation"],
)
def test_a_pages_height_is_its_articles_not_the_navigations(browser, nav, article):
    page = browser.new_page(viewport={"width": 1280, "height": SCREEN})
    try:
        page.set_content(PAGE.format(nav=nav, article=article))
        assert page.evaluate("document.documentElement.scrollHeight") == max(nav, article)  # the page's
        assert reading(page, SCREEN)["screens"] == article / SCREEN
    finally:
        page.close()
