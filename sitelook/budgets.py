"""Every limit and target of the site, in one place: the tests enforce the limits, and
`make measure` (scripts/measure.py) prints each figure beside its target. One of them the build
itself writes on a page, and is defined beside the code that writes it (`READER_ENVIRONMENT_MB`)."""

from __future__ import annotations

# a reader's environment as the home page has it made (CPU PyTorch, Jupyter): the page states it
from sitebuild.downloads import READER_ENVIRONMENT_MB as READER_ENVIRONMENT_MB

KB = 1024

# Enforced by the tests
PAGE_BUDGET = 36 * KB  # bytes of a page's HTML as a static host sends it (gzip), the largest page
FIRST_VISIT_BUDGET = (
    300 * KB
)  # bytes transferred (gzip, as a static host serves), every request of a first visit
SEARCHES = {  # what a reader types: the page that teaches it comes first
    "softmax": ("concepts/mental_model/",),
    "scaled dot-product": ("tutorials/scaled_dot_product_step_by_step/",),
    "why divide by sqrt d_k": ("tutorials/scaled_dot_product_step_by_step/",),
    "causal mask": ("tutorials/causal_self_attention/",),
    "multi-head": ("tutorials/scaled_dot_product_step_by_step/",),
    "flash attention": ("tutorials/efficient_attention/",),
    "positional encoding": ("concepts/positions/",),
    "RoPE": ("concepts/positions/",),
    "rotary": ("concepts/positions/",),
    "ALiBi": ("concepts/positions/",),
    "KV cache": ("tutorials/kv_cache/",),
    "induction head": ("tutorials/induction_heads/",),
    "paged attention": ("tutorials/serving_batches/",),
}
CORE_PATH = (  # the five pages a newcomer reads first, in order (mkdocs.yml's "Core path")
    "concepts/mental_model/",
    "tutorials/linear_to_self_attention/",
    "tutorials/causal_self_attention/",
    "tutorials/scaled_dot_product_step_by_step/",
    "concepts/transformer_block/",
)
CORE_PATH_PROSE_WORDS = 7000  # visible prose on the whole core path
CORE_PATH_FIGURES = 20  # pictures on the whole core path
PLAYGROUND = "playground/"  # the playground beside the first page: part of the path's reading
PLAYGROUND_WORDS = 800  # its visible prose (1,783 words when #43 was filed)

# The core path as issue #43 sets it, measured in screens of a 1280 x 800 laptop (the height of a
# page's article at 1280 px wide, divided by 800) and in the words of the visible prose
# (sitelook.browsing.READING); tests/browser/test_pages.py holds every core page and the path to them.
SCREEN = 800  # px: the unit of a page's length
CORE_PAGE_SCREENS = 8.0  # each core page
CORE_PATH_SCREENS = 45.0  # the five core pages and the playground
CORE_PATH_MINUTES = 45  # their stated reading times, added up
WORDS_PER_DIAGRAM = 250  # visible words of the path per explanatory diagram (the anchors: 110-120)
SCREENS_WITHOUT_A_PICTURE = 2.0  # the longest stretch of a core page's lesson with no picture
VISIBLE_CELL_LINES = 25  # the longest code block a teaching page shows unfolded
SIDEWAYS_ON_A_PHONE = 6  # formulas and plots that scroll sideways at 375 px, site-wide
# a reader's environment as the home page has it made (CPU PyTorch, Jupyter): the page states it, so
# its number lives with the build, which writes it there

# Targets that only `make measure` reports: times depend on the machine, so no test asserts them
BUILD_TARGET = 15.0  # seconds, a clean build
RELOAD_TARGET = 1.5  # seconds, from saving a page to the browser's reload under `make serve`
FAST_TESTS_TARGET = 60.0  # seconds, `make test-fast` on 2 cores
TEST_TARGET = 240.0  # seconds, `make test` with the tutorials' executions kept
COLD_TEST_TARGET = 720.0  # seconds, `make test` from an empty .cache (the venv not counted; issue 46)
TUTORIAL_CPU_TARGET = 60.0  # seconds of CPU, one tutorial's execution (its kernel and subprocesses)
CI_TARGET = 1200.0  # seconds, .ci/run from a fresh clone: Chromium, venv, both passes
