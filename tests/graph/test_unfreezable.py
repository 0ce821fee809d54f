"""Models TensorFlow's own freezing cannot handle: a serving signature that updates variables
gets one clear error; a variable gathered inside a while loop is repaired so it converts and
runs; a graph that still could not run is refused, never reported as converted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from conftest import run_cli

from workbench import trt_convert as trt
from workbench.graph.build import graph_from_graph_def
from workbench.graph.control_flow import MixedFramesError, check_frames
from workbench.graph.freeze import VariableUpdatesError, freeze_function
from workbench.graph.loading import load_model
from workbench.graph.prepare import finish, optimize, run_grappler

pytestmark = pytest.mark.slow


def save_training_mode_signature(path: Path) -> None:
    """A Keras model with BatchNormalization, served with training=True (it updates the
    moving statistics on every call)."""
    import keras

    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(4)(inputs)
    model = keras.Model(inputs, keras.layers.BatchNormalization(name="bn_layer")(hidden))
    module = tf.Module()
    module.model = model

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def serve(x: tf.Tensor) -> dict:
        return {"y": model(x, training=True)}

    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})


def save_gather_in_a_loop(path: Path) -> tf.Module:
    """An embedding table (a resource variable) gathered inside a while loop, as a beam search
    looks up the tokens it decoded."""
    module = tf.Module()
    module.table = tf.Variable(tf.random.stateless_normal([10, 4], seed=(1, 2)))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def serve(ids: tf.Tensor) -> dict:
        total = tf.zeros([tf.shape(ids)[0], 4])
        for step in tf.range(3):
            total += tf.gather(module.table, (ids + step) % 10)
        return {"y": total}

    module.serve = serve
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return module


@pytest.mark.parametrize("fast_freeze", [True, False])
def test_a_signature_that_updates_variables_gets_one_clear_error(
        tmp_path: Path, fast_freeze: bool) -> None:
    save_training_mode_signature(tmp_path)
    with pytest.raises(VariableUpdatesError) as error:
        optimize(load_model(str(tmp_path)), fast_freeze=fast_freeze)
    message = str(error.value)
    assert "updates variables" in message and "bn_layer" in message
    assert "training=False" in message and "model.export" in message
    assert "\n" not in message


def test_the_cli_says_it_in_one_line(tmp_path: Path) -> None:
    save_training_mode_signature(tmp_path)
    run = run_cli("convert", str(tmp_path))
    assert run.returncode != 0
    assert run.stderr.strip().count("\n") == 0, run.stderr
    assert "updates variables" in run.stderr and "bn_layer" in run.stderr


def test_the_app_shows_it_as_the_loading_error(tmp_path: Path) -> None:
    from workbench.ui import Workbench

    save_training_mode_signature(tmp_path / "model")
    app = Workbench(tmp_path / "model", store=tmp_path / "runs", background=False)
    assert app.result is None and "updates variables" in app.error
    assert "Could not open the model" in app.summary_tab.html.value


def test_tensorflows_freezing_of_a_gather_in_a_loop_cannot_run(tmp_path: Path) -> None:
    """TensorFlow's freeze adds the gather's axis Const outside the loop; the frame check
    says so in TensorFlow's terms."""
    module = save_gather_in_a_loop(tmp_path)
    frozen = freeze_function(module.serve.get_concrete_function(), fast=False)
    optimized = run_grappler(frozen.graph_def, frozen.inputs + frozen.outputs)
    with pytest.raises(MixedFramesError, match="Gather takes inputs from different loop frames"):
        check_frames(graph_from_graph_def(optimized))


def test_a_gather_in_a_loop_converts_runs_and_reloads(tmp_path: Path) -> None:
    module = save_gather_in_a_loop(tmp_path / "model")
    ids = np.array([1, 5, 9, 0], np.int32)
    expected = module.serve(tf.constant(ids))["y"].numpy()
    # Both freezing paths leave the axis Const outside the loop; both get it repaired.
    assert finish(optimize(load_model(str(tmp_path / "model")), fast_freeze=False))
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(tmp_path / "model"),
                                        use_dynamic_shape=True)
    function = converter.convert()
    np.testing.assert_allclose(function(ids=tf.constant(ids))["y"].numpy(), expected, rtol=1e-6)
    converter.build(lambda: [(tf.constant(ids),)])
    converter.save(str(tmp_path / "converted"))
    reloaded = tf.saved_model.load(str(tmp_path / "converted")).signatures["serving_default"]
    np.testing.assert_allclose(reloaded(ids=tf.constant(ids))["y"].numpy(), expected, rtol=1e-6)
