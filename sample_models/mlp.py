"""`quickstart_mlp`: the TF-TRT user guide's quickstart model, trained on 8x8 digits.

The guide trains Flatten -> Dense(128, relu) -> Dropout(0.2) -> Dense(10) on MNIST for 5 epochs
with Adam and a from-logits cross-entropy; we keep that architecture and recipe but feed the
8x8 digits bundled with scikit-learn, so the build needs no download.
"""

from __future__ import annotations

from pathlib import Path

import keras

from sample_models import digits, export
from sample_models.recipes import Recipe

EPOCHS = 5
BATCH_SIZE = 32


def model() -> keras.Model:
    # Explicit layer names keep graph node names identical from one build to the next.
    net = keras.Sequential([
        keras.Input(shape=(8, 8), name="images"),
        keras.layers.Flatten(name="flatten"),
        keras.layers.Dense(128, activation="relu", name="dense"),
        keras.layers.Dropout(0.2, name="dropout"),
        keras.layers.Dense(10, name="dense_1"),
    ], name="quickstart_mlp")
    return digits.compile_classifier(net)


def make(recipe: Recipe, directory: Path) -> None:
    export.seed_everything()
    data = digits.load()
    net = model()
    net.fit(data.x_train, data.y_train, epochs=EPOCHS, batch_size=BATCH_SIZE, verbose=0)
    export.save_keras(directory, recipe, net)
    digits.save(data, directory, image_shape=(8, 8))
