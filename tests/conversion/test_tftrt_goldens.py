"""Goldens from real TF-TRT runs (tests/goldens/, docs/tftrt-goldens.md): what NVIDIA's own
TF-TRT notebooks printed for Keras ResNet50, against our conversion of the same architecture
prepared for the same GPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession

GOLDEN = json.loads((Path(__file__).parents[1] / "goldens" / "tftrt_keras_resnet50.json")
                    .read_text())


@pytest.fixture(scope="module")
def resnet50(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Keras ResNet50 with the weights' structure of the released ImageNet weights: every
    convolution bias zero (Grappler folds those BiasAdds alike), batch-norm statistics distinct
    per channel (sample_models' trained-looking values)."""
    import keras
    import tensorflow as tf

    from sample_models import export

    net = keras.applications.ResNet50(weights=None)
    export.trained_looking(net)
    for variable in net.variables:
        if variable.path.endswith("bias") and "_conv/" in variable.path:
            variable.assign(np.zeros(variable.shape, variable.dtype))
    module = tf.Module()
    module.net = net

    @tf.function(input_signature=[tf.TensorSpec([None, 224, 224, 3], tf.float32,
                                                name="input_1")])
    def serve(x):
        return {"predictions": net(x)}

    path = tmp_path_factory.mktemp("golden") / "resnet50"
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return str(path)


@pytest.fixture
def without_tf32():
    """The printed runs used a TensorFlow before 2.10, whose layout optimizer converted an
    Ampere GPU's float32 convolutions to NCHW; since 2.10 it keeps NHWC while TensorFloat-32
    is on (TensorFlow's default). With TF32 off the newer rule does not apply."""
    import tensorflow as tf

    enabled = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    yield
    tf.config.experimental.enable_tensor_float_32_execution(enabled)


@pytest.mark.slow
def test_keras_resnet50_on_an_rtx_3080_is_one_engine_of_everything(resnet50: str,
                                                                   without_tf32) -> None:
    session = ConversionSession.open(resnet50, cache=False, prepare_for="8.6")
    result = session.convert(ConversionParams())
    assert len(result.engines) == GOLDEN["candidate_segments"] == 1
    # After TF-TRT's final constant folding: the Placeholder, the engine and the Identity.
    assert result.not_converted_top_level + len(result.engines) == GOLDEN["final_top_level_nodes"]
    # The layout optimizer acted (+4 nodes in TF-TRT's log), so the engine holds NCHW
    # convolutions and the input Transpose.
    engine = result.engines[0]
    assert engine.native_ops["Transpose"] == 1
    graph = session.prepared().graph_def
    assert all(n.attr["data_format"].s == b"NCHW" for n in graph.node if n.op == "Conv2D")
    # Known difference (docs/tftrt-goldens.md): TF-TRT replaced 500 nodes; the TF 2.21 Grappler
    # of this rebuild leaves 450. The figure is kept so that a change is seen.
    assert GOLDEN["replaced_segments"] == [500]
    assert len(engine.nodes) == 450


@pytest.mark.slow
def test_tensorflow_2_10_and_later_keep_nhwc_on_ampere(resnet50: str) -> None:
    """The same GPU with TF32 on (TF-TRT 2.16/2.17's default): no layout change at all."""
    gpu = ConversionSession.open(resnet50, cache=False, prepare_for="8.6")
    cpu = ConversionSession.open(resnet50, cache=False, prepare_for="cpu")
    graph = gpu.prepared().graph_def
    assert not any(n.op == "Transpose" for n in graph.node)
    assert len(graph.node) == len(cpu.prepared().graph_def.node)


PASS_LINE = re.compile(r"^  (\w+): Graph size after: (\d+) nodes \((-?\d+)\)", re.M)
PREPARE = ("import sys; from workbench.graph.loading import load_model; "
           "from workbench.graph.prepare import optimize; "
           "optimize(load_model(sys.argv[1]), target=sys.argv[2])")


@pytest.mark.slow
def test_grappler_removes_what_tftrts_grappler_removed(resnet50: str) -> None:
    """Grappler's per-pass log (meta_optimizer at verbosity 1) for the main graph: pruning
    and the dependency optimizer remove exactly as many nodes as in TF-TRT's printed run.
    The absolute sizes differ: Keras 3 writes each batch norm as separate ops, which constant
    folding folds, where the printed run's Keras 2 wrote one FusedBatchNormV3."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "meta_optimizer=1",
           "WORKBENCH_CACHE_DIR": "off"}
    done = subprocess.run([sys.executable, "-c", PREPARE, resnet50, "8.6"], env=env,
                          capture_output=True, text=True, check=True)
    # The last result block of TF-TRT's pass list (both stand-in runs give the same counts).
    blocks = done.stderr.split("Optimization results for grappler item")
    block = [b for b in blocks if "  model_pruner:" in b][-1]
    deltas = {name: int(delta) for name, _, delta in PASS_LINE.findall(block)}
    golden = GOLDEN["grappler_tf_graph_deltas"]
    assert deltas["model_pruner"] == golden["model_pruner"] == -322
    assert deltas["dependency_optimizer"] == golden["dependency_optimizer"] == -324
    # TF32 on: TensorFlow >= 2.10 keeps NHWC on this Ampere GPU (the printed run added 4).
    assert deltas["layout"] == 0 != golden["layout"]


# --- Keras 2 (tf_keras 2.17 on TensorFlow 2.17.1): the printed runs' own Keras ---------------

KERAS2_REASON = ("needs TensorFlow 2.17 with tf_keras 2.17 (the printed runs' Keras 2): CI's "
                 "TF 2.17 environment with tf-keras installed")


def _keras2_available() -> bool:
    import importlib.util

    import tensorflow as tf

    return tf.__version__.startswith("2.17.") and importlib.util.find_spec("tf_keras") is not None


@pytest.fixture(scope="module")
def keras2_resnet50(tmp_path_factory: pytest.TempPathFactory) -> str:
    """tf_keras ResNet50 saved with `model.save()`, as NVIDIA's notebooks saved it: convolution
    biases zero (as in the released weights), batch-norm values and the classifier's bias
    distinct (trained-looking)."""
    if not _keras2_available():
        pytest.skip(KERAS2_REASON)
    import tf_keras

    net = tf_keras.applications.ResNet50(weights=None)
    rng = np.random.default_rng(0)
    for variable in net.variables:
        name = variable.name
        if name.endswith("bias:0") and "_conv/" in name:
            value = np.zeros(variable.shape)
        elif "moving_variance" in name or "gamma" in name:
            value = rng.uniform(0.8, 1.2, variable.shape)
        elif "moving_mean" in name or "beta" in name or name.endswith("bias:0"):
            value = rng.normal(0.0, 0.05, variable.shape)
        else:
            continue
        variable.assign(value.astype(np.float32))
    path = tmp_path_factory.mktemp("keras2") / "resnet50_saved_model"
    net.save(str(path))
    return str(path)


@pytest.mark.slow
def test_keras2_resnet50_grappler_sizes_are_the_printed_ones(keras2_resnet50: str) -> None:
    """Prepared for the default GPU (T4) by TF 2.17: every pass up to constant folding leaves
    exactly the printed run's node count (880, 884, 560, 558)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "meta_optimizer=1",
           "WORKBENCH_CACHE_DIR": "off"}
    done = subprocess.run([sys.executable, "-c", PREPARE, keras2_resnet50, "7.5"], env=env,
                          capture_output=True, text=True, check=True)
    block = [b for b in done.stderr.split("Optimization results for grappler item")
             if "  model_pruner:" in b][-1]
    sizes = {name: int(size) for name, size, _ in PASS_LINE.findall(block)}
    golden = GOLDEN["grappler_tf_graph"]
    for name in ("model_pruner", "layout", "dependency_optimizer", "constant_folding"):
        assert sizes[name] == golden[name], name
    # Common-subgraph elimination merges equal constants: 47 here (the zero convolution
    # biases, one per shape), 50 in the printed run, whose released weights hold 3 more equal
    # constants (docs/tftrt-goldens.md).
    assert sizes["common_subgraph_elimination"] == golden["common_subgraph_elimination"] + 3


@pytest.mark.slow
def test_keras2_resnet50_converts_as_nvidia_printed(keras2_resnet50: str, caplog) -> None:
    """One engine, TF-TRT's non-conversion report word for word (NoOp 2x, Identity 1x,
    Placeholder 1x), three top-level nodes; the engine 3 nodes larger than the printed 500:
    the equal constants of the released weights that common-subgraph elimination merged."""
    from workbench import trt_convert as trt

    converter = trt.TrtGraphConverterV2(input_saved_model_dir=keras2_resnet50,
                                        precision_mode=trt.TrtPrecisionMode.FP32)
    with caplog.at_level("INFO"):
        converter.convert()
    printed = caplog.text  # TF-TRT logged its report
    assert "\t- NoOp -> 2x\n\t- Identity -> 1x\n\t- Placeholder -> 1x\n" in printed
    assert "\t- Total nonconverted OPs: 4\n\t- Total nonconverted OP Types: 3\n" in printed
    result = converter.result
    assert len(result.engines) == GOLDEN["candidate_segments"] == 1
    assert result.not_converted_top_level + 1 == GOLDEN["final_top_level_nodes"]
    assert len(result.engines[0].nodes) == GOLDEN["replaced_segments"][0] + 3
