"""How the site is built, and how it is looked at: one module per job.

Building: the hooks in ``sitebuild/hooks.py`` (named in mkdocs.yml) adapt MkDocs' events to the
modules that do the work (``execution``, ``tutorial_pages``, ``page_html``, ``typeset``,
``downloads``...). Looking at what was built: ``project`` (where the project is, a clean copy of it,
its strict build, its pages), ``budgets`` (every limit and target), ``local_server`` (a built site
served as a static host serves it) and ``browsing`` (headless Chromium), which the tests and the
tools in ``scripts/`` share. Nothing here imports the tests.

Imported from the project's root (``python -m properdocs`` and ``pytest`` both run there).
"""
