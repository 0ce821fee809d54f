"""scikit-learn's bundled 8x8 digits (no download), split once with a fixed seed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sample_models.recipes import DATA_FILE

SPLIT_SEED = 0
TEST_FRACTION = 0.2
CALIBRATION_SIZE = 128  # INT8 calibration takes a few batches from the training split
PIXEL_MAX = 16.0  # the digits' pixel values are 0..16


@dataclass(frozen=True)
class Digits:
    """Images as float32 [n, 8, 8] scaled to [0, 1]; labels as int32."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load() -> Digits:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    x = (data.images / PIXEL_MAX).astype(np.float32)
    y = data.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=y)
    return Digits(x_train, y_train, x_test, y_test)


def save(digits: Digits, directory: Path, image_shape: tuple[int, ...]) -> None:
    """Write the held-out split and a calibration slice, shaped like the model's input."""
    def shaped(x: np.ndarray) -> np.ndarray:
        return x.reshape((len(x), *image_shape))

    calib = slice(0, CALIBRATION_SIZE)
    np.savez(directory / DATA_FILE,
             x_test=shaped(digits.x_test), y_test=digits.y_test,
             x_calib=shaped(digits.x_train[calib]), y_calib=digits.y_train[calib])


def compile_classifier(net: Any) -> Any:
    """Adam on softmax cross-entropy from logits: both digits models train this way."""
    import keras

    net.compile(optimizer="adam",
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=["accuracy"])
    return net
