"""attn_ref.diagrams draws what it is given, where it is told, and refuses what it cannot draw."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from attn_ref.diagrams import Box, arrow, canvas, grid, note, outline, tile_order


@pytest.fixture
def ax():
    fig, ax = canvas(10, 6)
    yield ax
    plt.close(fig)


def test_a_grid_draws_its_values_through_the_colour_map_where_it_is_told(ax):
    values = np.array([[0.5, -2.0, 1.0], [0.0, 2.0, -0.25]])
    box = grid(ax, torch.tensor(values), x=2, y=1, cell=0.5)
    assert box == Box(2, 1, 1.5, 1.0)
    (image,) = ax.images
    np.testing.assert_array_equal(image.get_array(), values)
    assert image.get_extent() == [2, 3.5, 2.0, 1]
    assert image.get_clim() == (-2.0, 2.0)  # signed: symmetric about zero, white at zero


def test_weights_are_drawn_in_viridis_from_0_to_1(ax):
    grid(ax, [0.25, 0.75], x=0, y=0, cmap="viridis")
    (image,) = ax.images
    assert image.get_cmap().name == "viridis" and image.get_clim() == (0.0, 1.0)


def test_each_number_stands_out_from_its_cell(ax):
    """Black on light cells, white on dark ones: yellow (weight 1) and dark purple (weight 0)."""
    grid(ax, [[1.0, 0.0]], x=0, y=0, cmap="viridis", decimals=2)
    colours = {t.get_text(): t.get_color() for t in ax.texts}
    assert colours == {"1.00": "black", "0.00": "white"}


def test_masked_cells_are_hatched_with_no_number(ax):
    mask = np.tril(np.ones((3, 3), dtype=bool))
    grid(ax, np.full((3, 3), 0.5), x=0, y=0, cmap="viridis", decimals=1, mask=mask)
    assert len([p for p in ax.patches if p.get_hatch() == "///"]) == 3
    assert len(ax.texts) == 6
    assert ax.images[0].get_array().mask.tolist() == (~mask).tolist()


def test_a_row_takes_the_mask_of_a_row(ax):
    grid(ax, [0.5, -1.0, 2.0], x=0, y=0, decimals=1, mask=[True, False, True])
    assert [t.get_text() for t in ax.texts] == ["0.5", "2.0"]
    assert ax.images[0].get_array().mask.tolist() == [[False, True, False]]


def test_words_in_cells_stand_out_and_skip_masked_and_empty_cells(ax):
    """Categories coloured by a qualitative map, each cell named by a word (a block's id, say)."""
    mask = [[True, True, False, True]]
    grid(ax, [[0.5, 1.5, 2.5, 7.5]], x=0, y=0, cmap="tab10", vmax=10, mask=mask, labels=["a", "b", "c", ""])
    assert [t.get_text() for t in ax.texts] == ["a", "b"]  # c is masked, the last is empty
    (image,) = ax.images
    assert image.get_cmap().name == "tab10" and image.get_clim() == (0.0, 10.0)
    # white on tab10's blue (category 0), black on its orange (category 1)
    assert [t.get_color() for t in ax.texts] == ["white", "black"]


def test_rows_and_columns_are_named_beside_their_cells(ax):
    grid(ax, np.zeros((2, 3)), x=2, y=1, row_names=["t0", "t1"], column_names=["a", "b", "c"], label="K")
    placed = {t.get_text(): t.get_position() for t in ax.texts}
    assert placed["t0"][0] < 2 and placed["t0"][1] == 1.5 and placed["t1"][1] == 2.5  # left of each row
    assert [placed[c][0] for c in "abc"] == [2.5, 3.5, 4.5] and placed["a"][1] < 1  # above each column
    assert placed["K"][1] < placed["a"][1]  # the label above the column names


def test_boxes_give_the_edges_that_place_the_next_piece():
    box = Box(1, 2, 4, 2)
    assert (box.left, box.right, box.top, box.bottom, box.center) == ((1, 3), (5, 3), (3, 2), (3, 4), (3, 3))


def test_arrows_and_notes(ax):
    arrow(ax, (0, 0), (2, 0), text="softmax")
    note(ax, 1, 1, "a query")
    assert [t.get_text() for t in ax.texts] == ["softmax", "a query"] and len(ax.patches) == 1


def test_bad_input_is_refused_by_name(ax):
    with pytest.raises(
        ValueError, match=r"values must have shape \(rows, columns\) or \(columns,\), got \(2, 2, 2\)"
    ):
        grid(ax, np.zeros((2, 2, 2)), 0, 0)
    with pytest.raises(ValueError, match=r"mask has shape \(1, 2\), expected the values' \(2, 2\)"):
        grid(ax, np.zeros((2, 2)), 0, 0, mask=[[True, False]])
    with pytest.raises(ValueError, match=r"labels has 3 entries, expected one per cell of \(2, 2\)"):
        grid(ax, np.zeros((2, 2)), 0, 0, labels=["a", "b", "c"])
    with pytest.raises(ValueError, match=r"give decimals .* or labels .*, not both"):
        grid(ax, np.zeros((1, 2)), 0, 0, decimals=1, labels=["a", "b"])
    with pytest.raises(ValueError, match=r"row_names has 1 names, expected one per row: 2"):
        grid(ax, np.zeros((2, 2)), 0, 0, row_names=["t0"])
    with pytest.raises(ValueError, match=r"column_names has 3 names, expected one per column: 2"):
        grid(ax, np.zeros((2, 2)), 0, 0, column_names=["a", "b", "c"])
    with pytest.raises(ValueError, match="cell must be positive, got 0"):
        grid(ax, np.zeros((2, 2)), 0, 0, cell=0)
    with pytest.raises(ValueError, match="width and height must be positive, got 0 and 3"):
        canvas(0, 3)


def test_an_outline_frames_its_box_over_the_cells(ax):
    grid(ax, np.ones((2, 3)), x=0, y=0)
    assert outline(ax, Box(1, 0, 2, 1)) == Box(1, 0, 2, 1)
    (frame,) = ax.patches
    assert (frame.get_xy(), frame.get_width(), frame.get_height()) == ((1, 0), 2, 1)
    assert not frame.get_fill() and frame.get_zorder() > ax.images[0].get_zorder()
    with pytest.raises(ValueError, match="box must have a positive width and height"):
        outline(ax, Box(0, 0, 0, 1))


class _Step:  # a tile as the traces give it: its query and key positions
    def __init__(self, rows, cols):
        self.rows, self.cols = rows, cols


def test_tile_order_numbers_each_tile_by_its_step_and_hatches_the_others(ax):
    """5 queries and 7 keys in tiles of 2 by 3: 3 by 3 tiles, partial at the edges; the steps
    given column by column, as a backward pass computes them, with the top-right tile skipped."""
    steps = [_Step(range(i, min(i + 2, 5)), range(j, min(j + 3, 7))) for j in (0, 3, 6) for i in (0, 2, 4)]
    steps = [s for s in steps if (s.rows.start, s.cols.start) != (0, 6)]
    box = tile_order(ax, steps, (5, 7), (2, 3), x=1, y=1, cell=0.5, label="order")
    assert box == Box(1, 1, 1.5, 1.5)
    expected = np.array([[1, 4, 0], [2, 5, 7], [3, 6, 8]])  # by tile: the step that computed it
    np.testing.assert_array_equal(ax.images[0].get_array().filled(0), expected)
    assert [t.get_text() for t in ax.texts] == ["1", "4", "2", "5", "7", "3", "6", "8", "order"]
    assert len([p for p in ax.patches if p.get_hatch()]) == 1


def test_tile_order_refuses_a_step_outside_its_shape(ax):
    with pytest.raises(
        ValueError, match="step 1 starts at query 4 and key 0, outside the 4 queries and 4 keys"
    ):
        tile_order(ax, [_Step(range(4, 6), range(0, 2))], (4, 4), (2, 2), x=0, y=0)
    with pytest.raises(ValueError, match=r"shape and block_size must be positive, got \(4, 4\) and \(0, 2\)"):
        tile_order(ax, [], (4, 4), (0, 2), x=0, y=0)
