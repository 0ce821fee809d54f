"""The model zoo: every `keras.applications` architecture (random weights) plus small models
with the graph features TF-TRT meets in practice (loops, strings, `cond`, functions Grappler
keeps). Shared by `benchmarks/zoo.py` and `tests/test_zoo.py`.

Each entry makes a model `TrtGraphConverterV2` accepts (a Keras model or a SavedModel
directory) and inputs for it, in signature order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import sample_models
from sample_models import export, recipes


@dataclass(frozen=True)
class ZooModel:
    name: str
    make: Callable[[], Any]  # -> keras.Model or SavedModel directory
    # (rng, model) -> arrays; None: the workbench's own generated inputs for the signature
    # (`random_inputs`: encoded images for a string input the graph decodes).
    inputs: Callable[[np.random.Generator, Any], list[np.ndarray]] | None
    kind: str  # "application" or "feature"


# Parameters in millions, from the keras.applications documentation's table: the zoo runs
# the small architectures first (memory and time grow with them).
MILLION_PARAMS = {
    "MobileNetV3Small": 2.5, "MobileNetV2": 3.5, "MobileNet": 4.3, "EfficientNetB0": 5.3,
    "NASNetMobile": 5.3, "MobileNetV3Large": 5.4, "EfficientNetV2B0": 7.2,
    "EfficientNetB1": 7.9, "DenseNet121": 8.1, "EfficientNetV2B1": 8.2, "EfficientNetB2": 9.2,
    "EfficientNetV2B2": 10.2, "EfficientNetB3": 12.3, "DenseNet169": 14.3,
    "EfficientNetV2B3": 14.5, "EfficientNetB4": 19.5, "DenseNet201": 20.2,
    "EfficientNetV2S": 21.6, "Xception": 22.9, "InceptionV3": 23.9, "ResNet50": 25.6,
    "ResNet50V2": 25.6, "ConvNeXtTiny": 28.6, "EfficientNetB5": 30.6, "EfficientNetB6": 43.3,
    "ResNet101": 44.7, "ResNet101V2": 44.7, "ConvNeXtSmall": 50.2, "EfficientNetV2M": 54.4,
    "InceptionResNetV2": 55.9, "ResNet152": 60.4, "ResNet152V2": 60.4, "EfficientNetB7": 66.7,
    "ConvNeXtBase": 88.5, "NASNetLarge": 88.9, "EfficientNetV2L": 119.0, "VGG16": 138.4,
    "VGG19": 143.7, "ConvNeXtLarge": 197.7, "ConvNeXtXLarge": 350.1,
}


def application_names() -> list[str]:
    """Every architecture `keras.applications` exports, smallest first."""
    import keras

    names = [n for n in dir(keras.applications)
             if n[:1].isupper() and callable(getattr(keras.applications, n))]
    return sorted(set(names), key=lambda n: (MILLION_PARAMS.get(n, 1000.0), n))


def _application(name: str) -> Callable[[], Any]:
    def make() -> Any:
        import keras

        export.seed_everything()
        # Logits: with random weights a softmax saturates to one-hot, hiding any error.
        return getattr(keras.applications, name)(weights=None, classifier_activation=None)

    return make


def _images(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    # MobileNetV3 leaves the image size open: 224, its default size with weights.
    shape = (1, *(224 if d is None else d for d in model.input_shape[1:]))
    return [rng.uniform(-1, 1, shape).astype("float32")]


# --- feature models ---------------------------------------------------------------------------


def xla_function_model() -> Any:
    """A small ConvNeXt-like model: a grouped Conv2D, which Keras 3 runs on CPU through the
    jit-compiled `_conv_xla` tf.function (as in ConvNeXt's depthwise convolutions); Grappler
    never inlines it (`_XlaMustCompile`), so it stays a `StatefulPartitionedCall` between
    engines."""
    import keras

    export.seed_everything()
    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    for _ in range(2):
        x = keras.layers.Conv2D(8, 3, padding="same", groups=8)(x)
        x = keras.layers.ReLU()(keras.layers.LayerNormalization()(x))
        x = keras.layers.Conv2D(8, 1, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(5)(x))


def _small_images(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    return [rng.uniform(0, 1, (2, 16, 16, 3)).astype("float32")]


def _sample(name: str) -> Callable[[], Any]:
    """A control-flow sample model's SavedModel directory (built once, then reused)."""
    return lambda: str(sample_models.build(name))


def _sequences(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    shape = (2, recipes.SEQUENCE_STEPS, recipes.SEQUENCE_FEATURES)
    return [rng.standard_normal(shape).astype("float32")]


def _vectors(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    return [rng.standard_normal((3, recipes.SEQUENCE_FEATURES)).astype("float32")]


def _side_images(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    side = recipes.IMAGE_SIDE
    return [rng.uniform(0, 1, (2, side, side, 3)).astype("float32")]


# The loop and cond models are the control-flow sample models (sample_models/control_flow.py).
FEATURES = {
    "lstm": ZooModel("lstm", _sample("lstm"), _sequences, "feature"),
    "gru": ZooModel("gru", _sample("gru"), _sequences, "feature"),
    "map_fn": ZooModel("map_fn", _sample("map_fn_cnn"), _side_images, "feature"),
    "strings": ZooModel("strings", _sample("png_cnn"), None, "feature"),
    "cond": ZooModel("cond", _sample("cond_mlp"), _vectors, "feature"),
    "xla_function": ZooModel("xla_function", xla_function_model, _small_images, "feature"),
}


def zoo() -> dict[str, ZooModel]:
    """Every zoo model by name: the keras.applications architectures, then the features."""
    models = {name: ZooModel(name, _application(name), _images, "application")
              for name in application_names()}
    models.update(FEATURES)
    return models
