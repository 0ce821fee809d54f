"""Small models whose frozen graphs hold TensorFlow's v1 control flow (loops and a cond).

Freezing lowers `While` and `If` to `Enter`/`Exit`/`NextIteration`/`Merge`/`Switch`/`LoopCond`:
a Keras `LSTM` or `GRU` steps through time in a while loop, `tf.map_fn` over the batch is one
(object-detection pre- and post-processing), so is decoding a batch of PNG strings, and
`tf.cond` becomes a `Switch`/`Merge` pair. Each builder returns the model with seeded random
weights; `make` saves it as a sample model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from sample_models import export
from sample_models.recipes import (
    CONTROL_FLOW_CLASSES,
    IMAGE_SIDE,
    SEQUENCE_FEATURES,
    SEQUENCE_STEPS,
    Recipe,
)

RNN_UNITS = 16


def _rnn(layer: Callable[[int], keras.layers.Layer], name: str) -> keras.Model:
    export.seed_everything()
    inputs = keras.Input((SEQUENCE_STEPS, SEQUENCE_FEATURES), name="sequence")
    hidden = layer(RNN_UNITS)(inputs)
    return keras.Model(inputs, keras.layers.Dense(CONTROL_FLOW_CLASSES)(hidden), name=name)


def lstm() -> keras.Model:
    """A Keras LSTM classifier over sequences of shape [batch, steps, features]."""
    return _rnn(keras.layers.LSTM, "lstm")


def gru() -> keras.Model:
    """A Keras GRU classifier over sequences of shape [batch, steps, features]."""
    return _rnn(keras.layers.GRU, "gru")


def small_cnn(name: str) -> keras.Model:
    """Two convolutions and a dense head over [batch, side, side, 3] float images."""
    export.seed_everything()
    inputs = keras.Input((IMAGE_SIDE, IMAGE_SIDE, 3))
    x = keras.layers.Conv2D(8, 3, activation="relu")(inputs)
    x = keras.layers.Conv2D(8, 3, strides=2, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(CONTROL_FLOW_CLASSES)(x), name=name)


def standardize_each(images: tf.Tensor) -> tf.Tensor:
    """Per-image standardization, one image at a time with `tf.map_fn` (a while loop)."""
    return tf.map_fn(tf.image.per_image_standardization, images)


def decode_each(png: tf.Tensor) -> tf.Tensor:
    """A batch of PNG strings -> float images in [0, 1], decoded in a `tf.map_fn` loop."""
    spec = tf.TensorSpec((IMAGE_SIDE, IMAGE_SIDE, 3), tf.uint8)
    images = tf.map_fn(lambda s: tf.io.decode_png(s, channels=3), png, fn_output_signature=spec)
    return tf.cast(images, tf.float32) / 255.0


def cond_mlp() -> keras.Model:
    """Two dense branches over [batch, features]; `cond_body` picks one with `tf.cond`."""
    export.seed_everything()
    inputs = keras.Input((SEQUENCE_FEATURES,))
    return keras.Model(inputs, [keras.layers.Dense(CONTROL_FLOW_CLASSES)(inputs),
                                keras.layers.Dense(CONTROL_FLOW_CLASSES)(inputs)], name="cond")


def cond_body(model: keras.Model, features: tf.Tensor) -> tf.Tensor:
    """The first branch's logits when the batch mean is positive, else the second's."""
    def branch(i: int) -> Callable[[], tf.Tensor]:
        return lambda: tf.nn.relu(model(features, training=False)[i])
    return tf.cond(tf.reduce_mean(features) > 0.0, branch(0), branch(1))


def png_batch(batch: int, seed: int = 0) -> np.ndarray:
    """`batch` random PNG-encoded images (a string array): inputs for `png_cnn`."""
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (batch, IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)
    return np.array([tf.io.encode_png(p).numpy() for p in pixels], dtype=object)


def make(recipe: Recipe, directory: Path) -> None:
    (out,) = recipe.outputs
    if recipe.name in ("lstm", "gru"):
        export.save_keras(directory, recipe, lstm() if recipe.name == "lstm" else gru())
    elif recipe.name == "map_fn_cnn":
        net = small_cnn("map_fn_cnn")
        export.save(directory, recipe, net,
                    lambda images: {out: net(standardize_each(images), training=False)})
    elif recipe.name == "png_cnn":
        net = small_cnn("png_cnn")
        export.save(directory, recipe, net,
                    lambda png: {out: net(decode_each(png), training=False)},
                    check_inputs={"png": png_batch(2)})
    else:
        net = cond_mlp()
        export.save(directory, recipe, net, lambda features: {out: cond_body(net, features)})
