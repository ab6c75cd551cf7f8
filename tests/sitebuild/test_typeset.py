"""sitebuild.typeset: formulas become MathML at build, kept out of search, with words for search beside."""

import pytest

from sitebuild.typeset import TeXError, Typesetter, searchable


@pytest.fixture(scope="module")
def typesetter():
    running = Typesetter()
    yield running
    running.close()


def test_a_formula_becomes_mathml_out_of_search_with_hidden_words_beside(typesetter):
    page = typesetter.page(
        '<p>Attention is <span class="arithmatex">\\(\\operatorname{softmax}(QK^\\top)V\\)</span>.</p>'
        '<div class="arithmatex">\\[\\sqrt{d_k}\\]</div>',
        "test.md",
    )
    assert "arithmatex" not in page and page.count("<math data-search-exclude") == 2
    assert '<span class="math-words" hidden>softmax(QK^T)V</span>' in page
    assert '<div class="math-display" tabindex="0"><math data-search-exclude' in page
    assert '<span class="math-words" hidden>sqrt(d_k)</span></div>' in page


def test_tex_that_temml_cannot_read_names_the_page_and_the_formula(typesetter):
    with pytest.raises(TeXError, match=r"test\.md: .* in the formula '\\\\frac\{1\}'"):
        typesetter.page('<span class="arithmatex">\\(\\frac{1}\\)</span>', "test.md")


@pytest.mark.parametrize(
    "tex, words",
    [
        (r"\frac{a}{b} \cdot c", "(a)/(b) · c"),
        (r"\tfrac{1}{2}", "(1)/(2)"),
        (r"x^{2} + y_{t-1}", "x^2 + y_(t-1)"),
        (r"\mathbb{R}^{T \times d_k}", "R^(T × d_k)"),
        (r"\theta_i = b^{-2i/d}", "θ_i = b^(-2i/d)"),
        (r"\begin{aligned} a &= b \\ c &= d \end{aligned}", "a = b c = d"),
        (r"\left\lVert q \right\rVert_2", "‖ q ‖_2"),
    ],
)
def test_words_for_search_read_as_text(tex, words):
    assert searchable(tex) == words
