"""`digits_cnn`: a small Conv2D + BatchNorm + ReLU CNN on 8x8x1 digits, for FP16/INT8 accuracy.

Batch norm gives the graph the normalisation arithmetic of the usual vision models (Keras 3
lowers it to Rsqrt/Mul/Sub/AddV2 rather than FusedBatchNormV3), and the held-out split saved
next to it lets later work measure accuracy after reduced precision.
"""

from __future__ import annotations

from pathlib import Path

import keras

from sample_models import digits, export
from sample_models.recipes import Recipe

EPOCHS = 12
BATCH_SIZE = 32
# Default momentum 0.99 would leave the moving statistics near their initial values after
# a few hundred steps, and inference (which uses them) would be poor.
BN_MOMENTUM = 0.9


def _conv_block(x: keras.KerasTensor, filters: int, name: str) -> keras.KerasTensor:
    x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False, name=f"{name}_conv")(x)
    x = keras.layers.BatchNormalization(momentum=BN_MOMENTUM, name=f"{name}_bn")(x)
    return keras.layers.ReLU(name=f"{name}_relu")(x)


def model() -> keras.Model:
    images = keras.Input(shape=(8, 8, 1), name="images")
    x = _conv_block(images, 16, "block1")
    x = keras.layers.MaxPooling2D(2, name="block1_pool")(x)  # 4x4
    x = _conv_block(x, 32, "block2")
    x = keras.layers.MaxPooling2D(2, name="block2_pool")(x)  # 2x2
    x = keras.layers.Flatten(name="flatten")(x)
    x = keras.layers.Dense(64, activation="relu", name="fc")(x)
    logits = keras.layers.Dense(10, name="logits")(x)
    net = keras.Model(images, logits, name="digits_cnn")
    return digits.compile_classifier(net)


def make(recipe: Recipe, directory: Path) -> None:
    export.seed_everything()
    data = digits.load()
    x_train = data.x_train[..., None]
    net = model()
    net.fit(x_train, data.y_train, epochs=EPOCHS, batch_size=BATCH_SIZE, verbose=0)
    export.save_keras(directory, recipe, net)
    digits.save(data, directory, image_shape=(8, 8, 1))
