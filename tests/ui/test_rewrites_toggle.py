"""The app's rewrites toggle: the rewritten model converted in place of the original, and back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from workbench.ui import Workbench

pytestmark = pytest.mark.slow


def two_gelus(x):
    """Dense -> exact GELU (through Erfc) -> Dense -> exact GELU -> Dense."""
    rng = np.random.default_rng(0)
    for _ in range(2):
        x = x @ tf.constant(rng.normal(size=(8, 8)).astype(np.float32))
        x = 0.5 * x * tf.math.erfc(-x * 0.7071067811865476)
    return {"y": x @ tf.constant(rng.normal(size=(8, 8)).astype(np.float32))}


def test_rewrites_toggle(tmp_path: Path) -> None:
    module = tf.Module()
    module.serve = tf.function(two_gelus,
                               input_signature=[tf.TensorSpec((None, 8), tf.float32, name="x")])
    tf.saved_model.save(module, str(tmp_path / "gelus"),
                        signatures={"serving_default": module.serve})
    app = Workbench(tmp_path / "gelus", store=tmp_path / "runs", background=False)
    assert len(app.result.engines) == 3
    assert [a.engines for a in app.view.advice if a.setting == "rewrites"] == [1]
    app.controls.rewrites.value = True
    assert app.error is None and len(app.result.engines) == 1
    assert not any(n.op == "Erfc" for n in app.result.unconverted)
    app.controls.rewrites.value = False
    assert len(app.result.engines) == 3
    app.controls.rewrites.value = True  # the rewritten session is kept: no second rewrite
    assert len(app.result.engines) == 1
