"""The heatmap helper draws what it is given and labels it."""

import matplotlib.pyplot as plt
import pytest
import torch

from attn_ref.plotting import attention_heatmap, figure_to_svg


def test_heatmap_draws_the_weights_with_labels_and_numbers():
    weights = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    ax = attention_heatmap(weights, query_labels=["a", "b"], title="t")
    assert ax.images[0].get_array().tolist() == weights.tolist()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert [t.get_text() for t in ax.texts] == ["0.25", "0.75", "1.00", "0.00"]
    plt.close(ax.figure)


def test_heatmap_rejects_wrong_label_count_and_shape():
    with pytest.raises(ValueError, match="expected 2 query labels and 2 key labels"):
        attention_heatmap([[0.5, 0.5], [0.5, 0.5]], query_labels=["only one"])
    with pytest.raises(ValueError, match=r"weights must have shape \(L, S\), got \(3,\)"):
        attention_heatmap([0.2, 0.3, 0.5])


def test_svg_carries_its_text_alternative_and_no_date():
    fig, _ = plt.subplots()
    svg = figure_to_svg(fig, alt='a "quoted" <plot>')
    assert svg.startswith('<svg role="img" aria-label="a &quot;quoted&quot; &lt;plot>"')
    assert "<dc:date>" not in svg
    with pytest.raises(ValueError, match="alt must describe"):
        figure_to_svg(plt.figure(), alt=" ")


def test_shared_vmax_fixes_the_colour_scale():
    ax = attention_heatmap([[0.2, 0.3], [0.1, 0.4]], vmax=1.0)
    assert ax.images[0].get_clim() == (0.0, 1.0)
    plt.close(ax.figure)


def test_svg_displays_itself_in_a_notebook():
    svg = figure_to_svg(plt.figure(), alt="empty")
    assert svg._repr_html_() == str(svg)
