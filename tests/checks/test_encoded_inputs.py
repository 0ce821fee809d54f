"""Generated inputs for string inputs: encoded images where the graph decodes them (in a
`map_fn` loop, in a function), a one-line error otherwise; real SavedModels throughout."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import sample_models
from workbench.checks.conversion_check import check_conversion
from workbench.checks.encoded_inputs import DEFAULT_SIDE, _encode_bmp
from workbench.checks.inputs import generated_input_notes, random_inputs
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError

pytestmark = pytest.mark.slow


def _save(path: Path, serve: tf.types.experimental.GenericFunction) -> ConversionSession:
    module = tf.Module()
    module.serve = serve
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return ConversionSession.open(str(path), cache=False)


def _decode_each(strings: tf.Tensor, decode, shape) -> tf.Tensor:
    spec = tf.TensorSpec(shape, tf.float32)
    return tf.map_fn(lambda s: tf.cast(decode(s), tf.float32), strings,
                     fn_output_signature=spec)


def test_jpeg_size_comes_from_a_resize_in_the_loop(tmp_path: Path) -> None:
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="jpeg")])
    def serve(jpeg):
        images = _decode_each(jpeg, lambda s: tf.image.resize(
            tf.io.decode_jpeg(s, channels=1), (24, 20)), (24, 20, 1))
        return {"mean": tf.reduce_mean(images, axis=[1, 2, 3])}

    session = _save(tmp_path / "m", serve)
    (note,) = generated_input_notes(session)
    assert note.startswith("input jpeg: generated 24x20 1-channel JPEG images for DecodeJpeg ")
    batch = random_inputs(session, 3)["jpeg"]
    assert batch.shape == (3,) and batch.dtype == object
    decoded = tf.io.decode_jpeg(batch[0])  # valid JPEG bytes, of the size the model resizes to
    assert decoded.shape == (24, 20, 1)
    assert session.loaded(**random_inputs(session, 3))["mean"].shape == (3,)


def test_bmp_without_a_static_size_gets_the_default(tmp_path: Path) -> None:
    @tf.function(input_signature=[tf.TensorSpec([], tf.string, name="bmp")])
    def serve(bmp):
        return {"mean": tf.reduce_mean(tf.cast(tf.io.decode_bmp(bmp, channels=3), tf.float32),
                                       axis=[0, 1])}

    session = _save(tmp_path / "m", serve)
    (note,) = generated_input_notes(session)
    assert f"the default {DEFAULT_SIDE}x{DEFAULT_SIDE}" in note
    image = random_inputs(session)["bmp"]
    assert image.shape == ()
    assert tf.io.decode_bmp(image.item()).shape == (DEFAULT_SIDE, DEFAULT_SIDE, 3)


@pytest.mark.parametrize("channels", [3, 4])
def test_bmp_encoding_round_trips_through_tensorflow(channels: int) -> None:
    pixels = np.random.default_rng(channels).integers(0, 256, (5, 7, channels), np.uint8)
    np.testing.assert_array_equal(tf.io.decode_bmp(_encode_bmp(pixels), channels=channels),
                                  pixels)


def test_decode_inside_a_function(tmp_path: Path) -> None:
    @tf.function(experimental_attributes={"_noinline": True})
    def decode(png):
        return _decode_each(png, lambda s: tf.io.decode_png(s, channels=3), (8, 8, 3))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="png")])
    def serve(png):
        return {"sum": tf.reduce_sum(decode(png), axis=[1, 2, 3])}

    session = _save(tmp_path / "m", serve)
    (note,) = generated_input_notes(session)
    # The size is read inside the function body, from its own map_fn's stacked result.
    assert re.fullmatch(r"input png: generated 8x8 3-channel PNG images for DecodePng \S+ "
                        r"inside (Stateful)?PartitionedCall \S+ \(static size from "
                        r"TensorListStack \S+\)", note), note
    assert session.loaded(**random_inputs(session, 2))["sum"].shape == (2,)


def test_other_string_uses_name_what_to_pass(tmp_path: Path) -> None:
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="numbers")])
    def serve(numbers):
        return {"twice": 2.0 * tf.strings.to_number(numbers)}

    session = _save(tmp_path / "m", serve)
    assert generated_input_notes(session) == []
    with pytest.raises(WorkbenchError) as caught:
        random_inputs(session, 2)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("cannot generate string input 'numbers': it feeds StringToNumber")
    assert "workbench validate --inputs FILE.npz" in message


def test_png_cnn_validates_on_generated_inputs() -> None:
    """The Validation tab's and `workbench check`'s path on the string-input sample model."""
    session = ConversionSession.open(str(sample_models.build("png_cnn")))
    check = check_conversion(session, ConversionParams(), iterations=2, warmup=0)
    assert check.validation.passed, str(check.validation)
    assert check.engines >= 1
    assert any(note.startswith("input png: generated 16x16 3-channel PNG images")
               for note in check.notes)
