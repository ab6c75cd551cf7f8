"""The picture of the whole model: its boxes name the TinyDecoder's own modules (the final norm, the
output head from C to the vocabulary) and the tokens of the sentence, in the order the model runs
them, top to bottom, and its text stays legible on a phone."""

from matplotlib.patches import FancyBboxPatch

from attn_ref.examples import SENTENCE_TOKENS

PHONE_COLUMN_PX = 343  # a 375 px screen, less Material's side margins of 16 px
SMALLEST_TEXT_PX = 10


def box_texts(figure) -> list[str]:
    """The text inside each box, from the top of the picture down, left to right."""
    (ax,) = figure.axes
    boxes = sorted(
        (p for p in ax.patches if isinstance(p, FancyBboxPatch)), key=lambda p: (p.get_y(), p.get_x())
    )
    texts = []
    for box in boxes:
        x0, y0 = box.get_x(), box.get_y()
        inside = [
            t.get_text()
            for t in ax.texts
            if x0 <= t.get_position()[0] <= x0 + box.get_width()
            and y0 <= t.get_position()[1] <= y0 + box.get_height()
        ]
        assert len(inside) == 1, inside
        texts += inside
    return texts


def test_boxes_follow_the_model(figure, values):
    model, texts = values["model"], box_texts(figure)
    tokens = texts[: len(SENTENCE_TOKENS)]
    assert tokens == SENTENCE_TOKENS
    embedding, first, last, norm, head = texts[len(SENTENCE_TOKENS) :]
    assert "token embedding" in embedding and "position embedding" in embedding
    assert first.startswith("block 1") and last.startswith("block N")
    assert norm.endswith(type(model.norm).__name__)
    assert f"{model.head.in_features} → {model.head.out_features}" in head
    assert model.head.out_features == model.token_embedding.num_embeddings  # a score per word


def test_text_is_legible_on_a_phone(figure):
    renderer = figure.canvas.get_renderer()
    width_pt = figure.get_tightbbox(renderer).width * 72
    scale = PHONE_COLUMN_PX / (width_pt * 96 / 72)
    sizes = [t.get_fontsize() * 96 / 72 * scale for ax in figure.axes for t in ax.texts]
    assert sizes and min(sizes) >= SMALLEST_TEXT_PX
