"""What the mental model's pictures draw: each grid of coloured cells, read back from the figure
(tests/support/diagram_grids.py)."""

from tests.support.diagram_grids import grids, pictures  # noqa: F401 (fixtures)
