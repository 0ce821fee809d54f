"""Deterministic sample SavedModels for the workbench, built offline on first use.

    import sample_models
    saved_model_dir = sample_models.build("resnet50")   # builds once, then reuses
    model = sample_models.keras_model("digits_cnn")     # the same weights as a keras.Model

Builds live in `sample_models/build/NAME/` unless a `root` is given. TensorFlow is imported
only when something is actually built or loaded.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from sample_models import store
from sample_models.recipes import DATA_FILE, KERAS_FILE, NAMES, RECIPES, Recipe
from workbench.errors import WorkbenchError
from workbench.tf_compat import tensorflow_version

if TYPE_CHECKING:
    import keras
    import numpy as np

__all__ = ["NAMES", "ROOT", "UnknownSampleModelError", "build", "data", "ensure_built",
           "keras_model", "path", "recipe"]

ROOT = Path(__file__).resolve().parent / "build"


class UnknownSampleModelError(WorkbenchError):
    """A sample model name that isn't one of NAMES (or has no Keras model / data file)."""


def recipe(name: str) -> Recipe:
    """The recipe of `name`; raises UnknownSampleModelError listing the valid names."""
    if name not in RECIPES:
        raise UnknownSampleModelError(
            f"unknown sample model {name!r}; choose from: {', '.join(NAMES)}")
    return RECIPES[name]


def path(name: str, root: Path | None = None) -> Path:
    """Where `name` is (or would be) built; does not build it."""
    recipe(name)
    return Path(root or ROOT) / name


def ensure_built(name: str, root: Path | None = None) -> store.Outcome:
    """Build `name` unless a complete build of the current recipe exists; say which it did."""
    rec = recipe(name)

    def make(directory: Path) -> None:
        importlib.import_module(f"sample_models.{rec.module}").make(rec, directory)

    # A SavedModel is rebuilt by the TensorFlow that reads it: another release may not load it
    # and would trace a different graph (CI runs two TensorFlows on one checkout).
    version = f"v{rec.version}-tf{tensorflow_version()}"
    return store.ensure(Path(root or ROOT), name, version, make)


def build(name: str, root: Path | None = None) -> Path:
    """Build (or reuse) the SavedModel of `name` and return its directory."""
    return ensure_built(name, root).path


def keras_model(name: str, root: Path | None = None) -> keras.Model:
    """The Keras model behind a Keras-based sample, with the SavedModel's exact weights."""
    if not recipe(name).keras:
        keras_names = ", ".join(n for n in NAMES if RECIPES[n].keras)
        raise UnknownSampleModelError(
            f"sample model {name!r} is not Keras-based; Keras models: {keras_names}")
    import keras

    return keras.saving.load_model(build(name, root) / KERAS_FILE)


def data(name: str, root: Path | None = None) -> dict[str, np.ndarray]:
    """The digits split saved with `name`: x_test, y_test, x_calib, y_calib (input-shaped)."""
    if DATA_FILE not in recipe(name).files:
        raise UnknownSampleModelError(f"sample model {name!r} has no {DATA_FILE}")
    import numpy as np

    with np.load(build(name, root) / DATA_FILE) as npz:
        return dict(npz)
