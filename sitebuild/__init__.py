"""How the site is built: one module per job.

The hooks in ``sitebuild/hooks.py`` (named in mkdocs.yml) adapt MkDocs' events to the modules that
do the work (``execution``, ``tutorial_pages``, ``page_html``, ``typeset``, ``downloads``...).
Looking at what was built is another job, in the package ``sitelook``, which the build never
imports (tests/house/test_layout.py); nothing here imports the tests.

Imported from the project's root (``python -m properdocs`` and ``pytest`` both run there).
"""
