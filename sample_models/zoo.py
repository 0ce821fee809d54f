"""The model zoo: every `keras.applications` architecture (random weights) plus small models
with the graph features TF-TRT meets in practice (loops, strings, `cond`, functions Grappler
keeps). Shared by `benchmarks/zoo.py` and `tests/test_zoo.py`.

Each entry makes a model `TrtGraphConverterV2` accepts (a Keras model or a SavedModel
directory) and inputs for it, in signature order.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sample_models import export


@dataclass(frozen=True)
class ZooModel:
    name: str
    make: Callable[[], Any]  # -> keras.Model or SavedModel directory
    inputs: Callable[[np.random.Generator, Any], list[np.ndarray]]  # (rng, model) -> arrays
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


def _keras_sequence(layer: str) -> Callable[[], Any]:
    def make() -> Any:
        import keras

        export.seed_everything()
        inputs = keras.Input((12, 8))
        hidden = getattr(keras.layers, layer)(16)(inputs)
        return keras.Model(inputs, keras.layers.Dense(4)(hidden))

    return make


def _sequences(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    return [rng.standard_normal((2, 12, 8)).astype("float32")]


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


def _saved_module(name: str, build: Callable[[], Any]) -> Callable[[], Any]:
    """A SavedModel directory of a tf.Module (signature `serving_default`), made once."""
    made: dict[str, str] = {}

    def make() -> str:
        import tensorflow as tf

        if name not in made:
            module, signature = build()
            directory = tempfile.mkdtemp(prefix=f"zoo-{name}-")
            tf.saved_model.save(module, directory, signatures={"serving_default": signature})
            made[name] = directory
        return made[name]

    return make


def _map_fn_module() -> Any:
    import tensorflow as tf

    module = tf.Module()
    module.w = tf.Variable(np.linspace(-1, 1, 8 * 4, dtype="float32").reshape(8, 4))

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
    def serve(x: Any) -> Any:
        rows = tf.map_fn(lambda row: tf.nn.relu(row * 2.0 + 1.0), x)
        return {"y": tf.matmul(rows, module.w)}

    module.serve = serve
    return module, serve.get_concrete_function()


def _cond_module() -> Any:
    import tensorflow as tf

    module = tf.Module()
    module.w = tf.Variable(np.linspace(-1, 1, 8 * 8, dtype="float32").reshape(8, 8))

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32, name="x")])
    def serve(x: Any) -> Any:
        hidden = tf.nn.relu(tf.matmul(x, module.w) + 1.0)
        out = tf.cond(tf.reduce_sum(hidden) > 0.0, lambda: hidden * 2.0, lambda: hidden - 1.0)
        return {"y": tf.matmul(out, module.w)}

    module.serve = serve
    return module, serve.get_concrete_function()


def _strings_module() -> Any:
    """Decodes numbers written as strings, then a small dense network."""
    import tensorflow as tf

    module = tf.Module()
    module.w = tf.Variable(np.linspace(-1, 1, 4 * 6, dtype="float32").reshape(4, 6))

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.string, name="text")])
    def serve(text: Any) -> Any:
        values = tf.strings.to_number(text, tf.float32)
        hidden = tf.nn.relu(tf.matmul(values * 0.5 + 1.0, module.w))
        return {"y": tf.nn.softmax(hidden * 3.0 - 1.0)}

    module.serve = serve
    return module, serve.get_concrete_function()


def _vectors(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    return [rng.standard_normal((3, 8)).astype("float32")]


def _number_strings(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    values = rng.uniform(-5, 5, (3, 4))
    return [np.array([[f"{v:.3f}".encode() for v in row] for row in values], dtype=object)]


FEATURES = {
    "lstm": ZooModel("lstm", _keras_sequence("LSTM"), _sequences, "feature"),
    "gru": ZooModel("gru", _keras_sequence("GRU"), _sequences, "feature"),
    "map_fn": ZooModel("map_fn", _saved_module("map_fn", _map_fn_module), _vectors, "feature"),
    "strings": ZooModel("strings", _saved_module("strings", _strings_module), _number_strings,
                        "feature"),
    "cond": ZooModel("cond", _saved_module("cond", _cond_module), _vectors, "feature"),
    "xla_function": ZooModel("xla_function", xla_function_model, _small_images, "feature"),
}


def zoo() -> dict[str, ZooModel]:
    """Every zoo model by name: the keras.applications architectures, then the features."""
    models = {name: ZooModel(name, _application(name), _images, "application")
              for name in application_names()}
    models.update(FEATURES)
    return models
