"""sitebuild.page_html: the edits made to a rendered page, on small fragments of the markup MkDocs and
Pygments write (fast: no site build)."""

from __future__ import annotations

import re

import pytest

from sitebuild.page_html import apply, elements, named_dialogs, rendered_page, without_indentation

PLOT = (
    '<svg role="img" aria-label="Heatmap of &quot;weights&quot;" width="300pt" height="150pt" viewBox="0 0 300 150">'
    '<defs><clipPath id="c"><rect width="1" height="1"/></clipPath></defs><g clip-path="url(#c)"/></svg>'
)
PRINTED = '<div class="language-text highlight"><pre><span></span><code>tensor([1., 2.])\n</code></pre></div>'
CODE = (
    '<div class="language-python highlight"><pre><span></span><code>'
    '<span class="n">x</span><span class="w"> </span><span class="o">=</span> <span class="mi">1</span>'
    '<span class="p">)</span><span class="k">if</span>\n</code></pre></div>'
)


def test_a_plot_becomes_an_image_of_a_file_with_its_text_alternative():
    page, files = rendered_page(f"<p>Before</p>{PLOT}<p>after</p>", "tutorials/kv_cache/")
    ((path, svg),) = files.items()
    assert svg == PLOT  # the SVG's own bytes: viewBox and clipPath keep their case
    assert path.startswith("assets/plots/") and path.endswith(".svg")
    assert page == (
        f'<p>Before</p><span class="plot-frame"><img class="plot" src="../../{path}"'
        ' alt="Heatmap of &quot;weights&quot;" loading="lazy" width="400" height="200" style="min-width: 300px">'
        "</span><p>after</p>"
    )


def test_a_figures_two_drawings_share_a_frame_each_marked_with_its_scheme():
    light = PLOT.replace('role="img"', 'role="img" data-scheme="light"')
    dark = PLOT.replace('role="img"', 'role="img" data-scheme="dark"').replace("clip-path", "clip-path ")
    # Matplotlib ends its SVG with a line break, so the dark drawing starts on the next line.
    page, files = rendered_page(f"<p>Before</p>{light}\n{dark}<p>after</p>{light}", "")
    assert len(files) == 2 and page.count('<span class="plot-frame">') == 2
    first, second = page.split("<p>after</p>")
    assert '<img class="plot plot-light"' in first and '<img class="plot plot-dark"' in first
    assert first.index("plot-light") < first.index("plot-dark") < first.index("</span>")
    assert '<img class="plot plot-light"' in second and "plot-dark" not in second


def test_a_diagram_is_marked_as_one_on_its_image():
    diagram = PLOT.replace('role="img"', 'role="img" data-scheme="light" data-kind="diagram"')
    page, _ = rendered_page(diagram, "")
    assert page.startswith('<span class="plot-frame"><img class="plot plot-light" data-kind="diagram" src=')


def test_the_same_plot_twice_is_one_file():
    page, files = rendered_page(PLOT + PLOT, "")
    assert len(files) == 1 and page.count(f'src="{next(iter(files))}"') == 2


def test_printed_output_and_examples_stay_out_of_search_and_other_code_stays_in():
    signature = '<div class="doc-signature highlight"><pre><span></span><code>f(x)</code></pre></div>'
    page, _ = rendered_page(PRINTED + CODE + signature, "")
    assert page.count("<pre data-search-exclude>") == 2
    assert page.index("f(x)") > page.rindex("<pre data-search-exclude>")
    assert '<pre><span></span><code><span class="l">f(x)</span>' in page


def test_docstring_examples_stay_out_of_search():
    example = (
        '<div class="language-pycon highlight"><pre><span></span><code>&gt;&gt;&gt; f(1)</code></pre></div>'
    )
    assert "<pre data-search-exclude>" in rendered_page(example, "")[0]


def test_an_api_objects_name_and_first_paragraph_stay_in_search_and_its_details_do_not():
    page = (
        '<h2 id="m">m</h2><div class="doc doc-contents first"><p>Module summary.</p><p>More.</p>'
        '<div class="doc doc-children"><h3 id="m.f">f</h3><div class="doc doc-contents ">'
        "<p>f's summary.</p><table><tr><td><p>x</p></td></tr></table>"
        "<ul><li><p>a</p><ul><li>b</li></ul></li></ul></div></div></div><p>Page text.</p>"
    )
    assert rendered_page(page, "")[0] == (
        '<h2 id="m">m</h2><div class="doc doc-contents first"><p>Module summary.</p>'
        '<p data-search-exclude>More.</p><div class="doc doc-children"><h3 id="m.f">f</h3>'
        '<div class="doc doc-contents "><p>f\'s summary.</p>'
        "<table data-search-exclude><tr><td><p>x</p></td></tr></table>"
        "<ul data-search-exclude><li><p>a</p><ul><li>b</li></ul></li></ul></div></div></div><p>Page text.</p>"
    )


def test_spans_drawn_in_the_codes_own_colour_are_unwrapped_and_others_kept():
    page, _ = rendered_page(CODE, "")
    assert (
        '<code><span class="l">x = <span class="mi">1</span>)<span class="k">if</span></span>\n</code>'
        in page
    )
    inline = '<p><code class="highlight"><span class="n">x</span></code></p>'  # inline code: no lines
    assert rendered_page(inline, "")[0] == '<p><code class="highlight">x</code></p>'


DOCSTRING = (
    '<div class="language-python highlight"><pre><span></span><code><span class="k">def</span>'
    '<span class="w"> </span><span class="nf">f</span><span class="p">():</span>\n'
    '<span class="w">    </span><span class="sd">&quot;&quot;&quot;One,\n    two.&quot;&quot;&quot;</span>\n'
    "\n"
    '<span class="w">    </span><span class="k">return</span>\n</code></pre></div>'
)


def test_each_line_of_a_code_block_is_a_span_of_its_own_and_the_text_is_unchanged():
    """A token over two lines (a docstring) is closed and opened again; an empty line stays bare."""
    page, _ = rendered_page(DOCSTRING, "")
    code = page[page.index("<code>") + len("<code>") : page.index("</code>")]
    assert code.split("\n") == [
        '<span class="l"><span class="k">def</span> <span class="nf">f</span>():</span>',
        '<span class="l">    <span class="sd">&quot;&quot;&quot;One,</span></span>',
        '<span class="l"><span class="sd">    two.&quot;&quot;&quot;</span></span>',
        "",
        '<span class="l">    <span class="k">return</span></span>',
        "",
    ]
    assert _without_tags(code) == _without_tags(
        DOCSTRING[DOCSTRING.index("<code>") + 6 : DOCSTRING.index("</code>")]
    )


def _without_tags(markup: str) -> str:
    return re.sub(r"<[^>]*>", "", markup)


def test_everything_else_is_left_byte_for_byte():
    page = '<!doctype html><p class="x">a &amp; b<br>c</p><script>if (a < b) {}</script>'
    assert rendered_page(page, "")[0] == page


def test_elements_know_their_parents_and_where_they_end():
    html = "<div><pre><code>x</code></pre><img src=a></div>"
    found = {e.tag: e for e in elements(html)}
    assert found["code"].parent is found["pre"] and found["img"].end is None
    assert html[found["pre"].start : found["pre"].end_end] == "<pre><code>x</code></pre>"


def test_overlapping_edits_are_refused():
    with pytest.raises(ValueError, match="overlapping"):
        apply("abcdef", [(0, 3, "x"), (2, 4, "y")])


def test_an_unnamed_dialog_gets_a_name_and_a_named_one_keeps_its_own():
    page = '<div class="md-search" data-md-component="search" role="dialog"><p>x</p></div><div role="dialog" aria-label="A">'
    assert named_dialogs(page) == (
        '<div aria-label="Search" class="md-search" data-md-component="search" role="dialog"><p>x</p></div>'
        '<div role="dialog" aria-label="A">'
    )


def test_indentation_is_cut_to_its_line_break_where_white_space_is_not_content():
    page = (
        "<nav>\n    <ul>\n\n      <li>a\xa0b</li> <li>c</li>\n  </ul>\n</nav>\n"
        "<pre><code>x = 1\n    y = 2\n</code></pre>\n  <p>An <code>a  =\n  b</code> and\n \xa0more</p>"
        "<script>\n  let s = `\n    kept`;\n</script>"
    )
    assert without_indentation(page) == (
        "<nav>\n<ul>\n<li>a\xa0b</li> <li>c</li>\n</ul>\n</nav>\n"
        "<pre><code>x = 1\n    y = 2\n</code></pre>\n<p>An <code>a  =\n  b</code> and\n\xa0more</p>"
        "<script>\n  let s = `\n    kept`;\n</script>"
    )


def test_references_and_exercises_keep_their_headings_in_search_but_not_their_text():
    page, _ = rendered_page(
        '<h2 id="exercises">Exercises</h2><p>Try <em>this</em>.</p><details><p>Answer</p></details>'
        '<h2 id="summary">Summary</h2><p>Kept.</p>'
        '<h2 id="references">References</h2><ul><li>Vaswani et al.</li></ul><p>Next: a page.</p>',
        "",
    )
    assert page.count("data-search-exclude") == 4  # the two blocks of each section, not what is inside them
    assert "<p data-search-exclude>Try <em>this</em>" in page and "<details data-search-exclude>" in page
    assert "<ul data-search-exclude>" in page and "<p data-search-exclude>Next: a page.</p>" in page
    assert "<p>Kept.</p>" in page and '<h2 id="references">' in page
