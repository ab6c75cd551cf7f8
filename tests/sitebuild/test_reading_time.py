"""sitebuild.reading_time: minutes counted from what a reader sees of a page."""

from sitebuild.reading_time import minutes, with_minutes, with_reading_time

PROSE = "<p>" + "word " * 200 + "</p>"  # a minute


def test_prose_is_read_at_200_words_a_minute():
    assert minutes("<h1>Title</h1>" + PROSE) == 2  # 202 words: just over a minute, rounded up
    assert minutes("<h1>Title</h1>" + PROSE * 3) == 4


def test_folded_parts_code_math_and_figures_count_as_a_reader_meets_them():
    folded = (
        "<details><summary>Solution</summary>"
        + PROSE * 10
        + "<pre><code>"
        + "x\n" * 100
        + "</code></pre></details>"
    )
    assert minutes("<p>a</p>" + folded) == 1  # folded away: not counted
    code = "<pre><code>" + "x = 1\n" * 58 + "x = 1</code></pre>"  # 59 lines at 2 s
    assert minutes("<p>a</p>" + code) == 2
    figures = '<span class="plot-frame"><img class="plot"></span>' * 9  # 9 at 12 s
    assert minutes("<p>a</p>" + figures) == 2
    math = "<math>" + "<mi>x</mi>" * 1000 + "</math>"
    assert minutes("<p>a</p>" + math) == 1


def test_the_line_goes_under_the_title_of_teaching_pages_only():
    page = "<h1>Title</h1>" + PROSE
    timed, taken = with_reading_time(page, "tutorials/kv_cache.md")
    assert timed.startswith('<h1>Title</h1><p class="reading-time">About 2 min to read') and taken == 2
    for reference in ("reference/api.md", "index.md", "notation.md"):
        assert with_reading_time(page, reference) == (page, None)


def test_the_home_pages_map_gets_each_named_pages_minutes():
    home = '<td><span class="page-minutes" data-page="a.md"></span></td><span class="page-minutes" data-page="b.md"></span>'
    assert with_minutes(home, {"a.md": 3, "b.md": 12}) == (
        '<td><span class="page-minutes" data-page="a.md">3</span></td><span class="page-minutes" data-page="b.md">12</span>'
    )
