"""Every limit and target of the site, in one place: the tests enforce the limits, and
`make measure` (scripts/measure.py) prints each figure beside its target."""

from __future__ import annotations

KB = 1024

# Enforced by the tests
PAGE_BUDGET = 150 * KB  # bytes of HTML, the largest page
FIRST_VISIT_BUDGET = (
    300 * KB
)  # bytes transferred (gzip, as a static host serves), every request of a first visit
SEARCHES = {  # what a reader types: the pages with a section that teaches it
    "softmax": ("tutorials/linear_to_self_attention/", "tutorials/scaled_dot_product_step_by_step/"),
    "causal mask": ("tutorials/causal_self_attention/",),
    "multi-head": ("concepts/mental_model/", "tutorials/scaled_dot_product_step_by_step/"),
    "positional encoding": ("concepts/positions/",),
    "rotary": ("concepts/positions/",),
    "ALiBi": ("concepts/positions/",),
}

# Targets that only `make measure` reports: times depend on the machine, so no test asserts them
BUILD_TARGET = 15.0  # seconds, a clean build
RELOAD_TARGET = 1.5  # seconds, from saving a page to the browser's reload under `make serve`
TEST_TARGET = 180.0  # seconds, `make test` from a warm checkout
FAST_TESTS_TARGET = 60.0  # seconds, `pytest -m "not site and not browser"`
