"""How the built site is looked at, by the tests and the tools in ``scripts/`` alike: ``project``
(where the project is, a clean copy of it, its strict build, its pages), ``budgets`` (every limit
and target), ``local_server`` (a built site served as a static host serves it) and ``browsing``
(headless Chromium; it needs the ``test`` extra).

It may import the build (``sitebuild``); the build imports none of it (tests/house/test_layout.py), so
building the site needs nothing that looks at it. Nothing here imports the tests.
"""
