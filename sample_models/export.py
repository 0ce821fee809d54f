"""Shared TensorFlow helpers: seeding, saving a `serving_default` signature, checking it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from sample_models.recipes import KERAS_FILE, Recipe, Spec

SEED = 1234
SIGNATURE_KEY = "serving_default"


def seed_everything(seed: int = SEED) -> None:
    """Python, NumPy, TensorFlow and Keras' global seed generator, so weights are repeatable."""
    keras.utils.set_random_seed(seed)


# Variables an untrained Keras model leaves at 0 (shifts) or 1 (scales), by their last name.
_SHIFTS = ("bias", "beta", "moving_mean")
_SCALES = ("gamma", "moving_variance")


def trained_looking(model: keras.Model, seed: int = SEED) -> None:
    """Give every bias, normalization shift and statistic a small seeded non-zero value.

    A freshly initialized model has them all at 0 or 1, and Grappler then folds each BiasAdd
    and batch-norm add into an Identity, which a trained model's graph never shows. Scales
    stay near 1 and variances positive, so activations keep their size.
    """
    rng = np.random.default_rng(seed)
    for variable in sorted(model.variables, key=lambda v: v.path):
        kind = variable.path.rsplit("/", 1)[-1]
        if kind in _SHIFTS:
            value = rng.normal(0.0, 0.05, variable.shape)
        elif kind in _SCALES:
            value = rng.uniform(0.8, 1.2, variable.shape)
        else:
            continue
        variable.assign(value.astype(variable.dtype))


def tensor_spec(name: str, spec: Spec) -> tf.TensorSpec:
    return tf.TensorSpec(spec.shape, tf.as_dtype(spec.dtype), name=name)


def serving_function(recipe: Recipe, body: Callable[..., dict]) -> tf.types.experimental.Function:
    """A tf.function over the recipe's inputs, in order; `body` gets them as keyword arguments.

    The TensorSpec names become the signature's input keys (and the graph's Placeholder names).
    """
    names = list(recipe.inputs)
    specs = [tensor_spec(n, recipe.inputs[n]) for n in names]

    def serve(*tensors: tf.Tensor) -> dict:
        return body(**dict(zip(names, tensors, strict=True)))

    return tf.function(serve, input_signature=specs)


def save(directory: Path, recipe: Recipe, model: keras.Model, body: Callable[..., dict],
         check_inputs: dict[str, np.ndarray] | None = None) -> None:
    """Save `body` as the only signature; `model` must own every variable `body` uses.

    `check_inputs` replace the zero-valued smoke inputs (a PNG decoder needs real PNGs).

    Only the variables hang off the saved root, as Keras' own export does: tracking the Keras
    model itself would also export its `_default_save_signature` and its optimizer.
    """
    owner = tf.Module()
    owner.model_variables = list(model.variables)
    fn = serving_function(recipe, body)
    tf.saved_model.save(owner, str(directory), signatures={SIGNATURE_KEY: fn})
    check_signature(directory, recipe, check_inputs)


def save_keras(directory: Path, recipe: Recipe, model: keras.Model) -> None:
    """A Keras model with one input and one output, as a SavedModel plus a `.keras` file."""
    (out_name,) = recipe.outputs
    save(directory, recipe, model, lambda **x: {out_name: model(*x.values(), training=False)})
    model.save(directory / KERAS_FILE)


def tiny_inputs(recipe: Recipe, batch: int = 2, free_dim: int = 5) -> dict[str, np.ndarray]:
    """Zero-valued inputs for a smoke run: `batch` rows, `free_dim` for other unknown dims."""
    shapes = {n: [batch] + [free_dim if d is None else d for d in s.shape[1:]]
              for n, s in recipe.inputs.items()}
    return {n: np.zeros(shapes[n], dtype=recipe.inputs[n].dtype) for n in recipe.inputs}


def check_signature(directory: Path, recipe: Recipe,
                    inputs: dict[str, np.ndarray] | None = None) -> None:
    """Load the SavedModel, run its signature on a tiny input, and compare with the recipe."""
    fn = tf.saved_model.load(str(directory)).signatures[SIGNATURE_KEY]
    inputs = tiny_inputs(recipe) if inputs is None else inputs
    outputs = fn(**{n: tf.constant(v) for n, v in inputs.items()})
    if set(outputs) != set(recipe.outputs):
        raise RuntimeError(f"{recipe.name}: outputs {sorted(outputs)} != {sorted(recipe.outputs)}")
    for name, spec in recipe.outputs.items():
        got = outputs[name]
        if got.dtype.name != spec.dtype or not _shape_matches(got.shape, spec.shape):
            raise RuntimeError(f"{recipe.name}: output {name} is {got.dtype.name}{got.shape}, "
                               f"expected {spec.dtype}{spec.shape}")


def _shape_matches(shape: tf.TensorShape, expected: tuple[int | None, ...]) -> bool:
    return len(shape) == len(expected) and all(
        e is None or d == e for d, e in zip(shape.as_list(), expected, strict=True))
