"""The playground's pictures are read back as the mental model's are: each grid of coloured cells."""

from tests.snippets.mental_model.conftest import grids, pictures

__all__ = ["grids", "pictures"]
