"""The model zoo: every `keras.applications` architecture (random weights) plus small models
with the graph features TF-TRT meets in practice (loops, strings, `cond`, functions Grappler
keeps). Shared by `benchmarks/zoo.py` and `tests/test_zoo.py`.

Each entry makes a model `TrtGraphConverterV2` accepts (a Keras model or a SavedModel
directory) and inputs for it, in signature order.
"""

from __future__ import annotations

import inspect
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


def application_names() -> list[str]:
    """Every architecture `keras.applications` exports (ConvNeXtTiny, ..., Xception)."""
    import keras

    names = []
    for module in vars(keras.applications).values():
        for name, obj in vars(module).items() if inspect.ismodule(module) else ():
            if inspect.isfunction(obj) and name[:1].isupper():
                names.append(name)
    return sorted(set(names))


def _application(name: str) -> Callable[[], Any]:
    def make() -> Any:
        import keras

        export.seed_everything()
        return getattr(keras.applications, name)(weights=None)

    return make


def _images(rng: np.random.Generator, model: Any) -> list[np.ndarray]:
    shape = (1, *model.input_shape[1:])
    return [rng.uniform(0, 255, shape).astype("float32")]


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
