"""Per-TF-op profiles of the native model: rows map to the prepared graph's nodes exactly."""

from __future__ import annotations

import numpy as np
import pytest

import sample_models
from workbench.checks.inputs import random_inputs
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.hardware import cpu_device_name
from workbench.profiling.latency import batch_sweep
from workbench.profiling.layers import LAYER_COLUMNS
from workbench.profiling.tensorflow import native_callable, profile_tensorflow

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def digits() -> ConversionSession:
    return ConversionSession.open(sample_models.build("digits_cnn"))


@pytest.fixture(scope="module")
def digits_profile(digits):
    return profile_tensorflow(digits, random_inputs(digits, batch_size=4), runs=5, warmup=1)


@pytest.fixture(scope="module")
def resnet() -> ConversionSession:
    # Prepared for the CPU: TensorFlow's CPU runtime fuses NHWC Conv2D + BiasAdd (below).
    return ConversionSession.open(sample_models.build("resnet50"), prepare_for="cpu")


def test_every_row_is_a_real_node_with_its_op(digits, digits_profile):
    graph = digits.prepared("FP32").graph
    assert list(digits_profile.columns[: len(LAYER_COLUMNS)]) == LAYER_COLUMNS
    assert len(digits_profile) > 10
    for row in digits_profile.itertuples():
        node = graph[row.layer]
        assert row.layer_type == node.op
        assert row.tf_nodes == [row.layer]
    # Every compute node of the model ran and was timed.
    compute = {n.name for n in graph.real_nodes if n.op in ("Conv2D", "MatMul", "MaxPool")}
    assert compute and compute <= set(digits_profile["layer"])


def test_labels_times_and_shares(digits_profile):
    assert set(digits_profile["source"]) == {"tensorflow"}
    assert set(digits_profile["run"]) == {"native TF"}
    assert set(digits_profile["device"]) == {cpu_device_name()}
    assert (digits_profile["avg_ms"] > 0).all()
    assert (digits_profile["median_ms"] >= 0).all()
    assert digits_profile["pct"].sum() == pytest.approx(100.0)
    assert list(digits_profile["avg_ms"]) == sorted(digits_profile["avg_ms"], reverse=True)


def test_precision_follows_the_node_dtype(digits_profile):
    precision = dict(zip(digits_profile["layer_type"], digits_profile["precision"], strict=False))
    assert precision["Conv2D"] == "FP32"
    shape_rows = digits_profile[digits_profile["layer_type"] == "Shape"]
    assert set(shape_rows["precision"]) <= {"INT32"}


def test_resnet50_time_is_dominated_by_convolutions(resnet):
    """TensorFlow's runtime fuses each Conv2D with the BiasAdd after it (a trained-looking
    model keeps its biases) into one _FusedConv2D, timed under the BiasAdd's name."""
    profile = profile_tensorflow(resnet, random_inputs(resnet), runs=3, warmup=1, run="rn50")
    by_type = profile.groupby("layer_type")["pct"].sum()
    assert by_type.idxmax() == "BiasAdd"
    assert by_type["Conv2D"] + by_type["BiasAdd"] > 50.0
    nodes = resnet.prepared("FP32").graph.real_nodes
    convs = [n.name for n in nodes if n.op == "Conv2D"]
    biases = [n.name for n in nodes if n.op == "BiasAdd"]
    assert len(convs) == 53 and len(biases) == 54  # ResNet-50's convolutions, and its Dense
    assert set(biases) <= set(profile["layer"])
    assert set(profile["run"]) == {"rn50"}


def test_resnet50_prepared_for_a_gpu_times_its_nchw_convolutions() -> None:
    """Prepared for the T4, the convolutions are NCHW: run channels-last between Transposes
    (graph/channels_last.py), whose time counts as the Conv2D's; the NCHW BiasAdd is not fused."""
    session = ConversionSession.open(sample_models.build("resnet50"))
    profile = profile_tensorflow(session, random_inputs(session), runs=2, warmup=1)
    by_type = profile.groupby("layer_type")["pct"].sum()
    assert by_type.idxmax() == "Conv2D" and by_type["Conv2D"] > 50.0
    assert (profile["layer_type"] == "Conv2D").sum() == 53


def test_nodes_keeps_only_the_unconverted_part(digits):
    result = digits.convert(ConversionParams(minimum_segment_size=3))
    unconverted = {u.name for u in result.unconverted}
    profile = profile_tensorflow(digits, random_inputs(digits), runs=2, warmup=0,
                                 run="unconverted", nodes=unconverted)
    assert len(profile) > 0
    assert set(profile["layer"]) <= unconverted
    assert profile["pct"].sum() == pytest.approx(100.0)


def test_bad_inputs_and_nodes_give_clear_errors(digits):
    good = random_inputs(digits)
    with pytest.raises(WorkbenchError, match="missing images"):
        profile_tensorflow(digits, {}, runs=1, warmup=0)
    with pytest.raises(WorkbenchError, match="unknown pixels"):
        profile_tensorflow(digits, {**good, "pixels": good["images"]}, runs=1, warmup=0)
    with pytest.raises(WorkbenchError, match="could not run"):
        profile_tensorflow(digits, {"images": np.zeros((1, 9, 9, 1), np.float32)}, runs=1,
                           warmup=0)
    with pytest.raises(WorkbenchError, match="no node named nope"):
        profile_tensorflow(digits, good, runs=1, warmup=0, nodes=["nope"])
    with pytest.raises(WorkbenchError, match="runs"):
        profile_tensorflow(digits, good, runs=0)


def test_random_inputs_match_the_signature(digits):
    inputs = random_inputs(digits, batch_size=3, seed=7)
    assert list(inputs) == ["images"]
    assert inputs["images"].shape == (3, 8, 8, 1)
    assert inputs["images"].dtype == np.float32
    assert np.array_equal(inputs["images"], random_inputs(digits, batch_size=3, seed=7)["images"])
    assert not np.array_equal(inputs["images"], random_inputs(digits, 3, seed=8)["images"])


def test_random_ids_stay_inside_the_embedding_tables():
    bert = ConversionSession.open(sample_models.build("tiny_bert"))
    inputs = random_inputs(bert, batch_size=2, other_dim=24)
    assert {k: v.shape for k, v in inputs.items()} == {
        "input_mask": (2, 24), "input_type_ids": (2, 24), "input_word_ids": (2, 24)}
    assert all(v.dtype == np.int32 for v in inputs.values())
    assert set(np.unique(inputs["input_type_ids"])) == {0, 1}  # the type table has 2 rows
    assert set(np.unique(inputs["input_mask"])) == {0, 1}
    assert inputs["input_word_ids"].max() < 100 and inputs["input_word_ids"].max() > 1
    profile = profile_tensorflow(bert, inputs, runs=1, warmup=0)
    assert "BatchMatMulV2" in set(profile["layer_type"]) or "Einsum" in set(profile["layer_type"])


def test_random_uint8_images_cover_the_byte_range():
    detector = ConversionSession.open(sample_models.build("detector"))
    images = random_inputs(detector, batch_size=2)["images"]
    assert images.dtype == np.uint8 and images.shape == (2, 64, 64, 3)
    assert images.max() > 200


def test_native_callable_returns_the_model_outputs_and_sweeps_batches(digits):
    inputs = random_inputs(digits, batch_size=2)
    outputs = native_callable(digits, inputs)()
    expected = digits.loaded(**inputs)["logits"].numpy()
    assert set(outputs) == {"logits"} and np.array_equal(outputs["logits"], expected)
    with pytest.raises(WorkbenchError, match="missing images"):
        native_callable(digits, {})
    frame = batch_sweep(lambda b: native_callable(digits, random_inputs(digits, b)), [1, 8],
                        backend="tensorflow", device=cpu_device_name(), warmup=2, iterations=5)
    assert list(frame["batch_size"]) == [1, 8]
    assert (frame["mean_ms"] > 0).all() and set(frame["backend"]) == {"tensorflow"}
