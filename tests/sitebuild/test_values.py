"""sitebuild.values: which variables of a finished script or kernel a test can read."""

from __future__ import annotations

import numpy as np
import torch

from sitebuild.values import kept, load, save


def test_data_is_kept_and_code_figures_and_ipython_names_are_not():
    import matplotlib.pyplot as plt

    figure = plt.figure()
    namespace = {
        "x": torch.ones(2),
        "a": np.zeros(3),
        "n": 3,
        "rows": [1.0, 2.0],
        "model": torch.nn.Linear(2, 1),
        "_y": 1.5,  # a name of the page's own (the blog post's `_y`) is data too
        "f": lambda: 1,
        "fig": figure,
        "_": 4,
        "__": 5,
        "_i3": "code",
        "_7": 7,
        "Out": {},
        "__name__": "__main__",
    }
    assert set(kept(namespace)) == {"x", "a", "n", "rows", "model", "_y"}
    plt.close(figure)


def test_what_does_not_pickle_is_left_out():
    unpicklable = [lambda: 1]  # a list of functions
    assert kept({"bad": unpicklable, "good": 1}) == {"good": 1}


def test_saved_values_load_back(tmp_path):
    save({"x": torch.arange(3), "f": print}, tmp_path / "values.pickle")
    loaded = load(tmp_path / "values.pickle")
    assert list(loaded) == ["x"] and torch.equal(loaded["x"], torch.arange(3))
