"""What the tests share, in one place: every test module imports its helpers from here, never from
another test module (tests/test_layout.py checks it)."""
