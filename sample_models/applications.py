"""`resnet50` and `mobilenet_v2`: Keras architectures with seeded random weights.

Random weights (`weights=None`) keep the build offline; the graphs are what TF-TRT cares about,
so biases and batch-norm statistics get trained-looking values (`export.trained_looking`).
"""

from __future__ import annotations

from pathlib import Path

import keras

from sample_models import export
from sample_models.recipes import Recipe

ARCHITECTURES = {
    "resnet50": keras.applications.ResNet50,
    "mobilenet_v2": keras.applications.MobileNetV2,
}


def model(name: str) -> keras.Model:
    export.seed_everything()
    net = ARCHITECTURES[name](weights=None, input_shape=(224, 224, 3))
    export.trained_looking(net)
    return net


def make(recipe: Recipe, directory: Path) -> None:
    export.save_keras(directory, recipe, model(recipe.name))
