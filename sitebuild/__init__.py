"""How the site is built: the code behind the MkDocs hooks, one module per job.

Imported from the project's root (``python -m properdocs`` and ``pytest`` both run there); the
hooks in ``docs/hooks.py`` adapt MkDocs' events to these functions.
"""
