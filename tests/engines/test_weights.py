"""Weights made into TensorFlow tensors and variables from their protos."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from workbench.engines import weights


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_a_variable_filled_a_slice_at_a_time_holds_the_value(dtype, monkeypatch) -> None:
    monkeypatch.setattr(weights, "_SLICE_BYTES", 1000)  # many slices, the last one short
    value = (np.arange(37 * 5 * 3) % 251).astype(dtype).reshape(37, 5, 3)
    variable = weights.as_variable(tf.make_tensor_proto(value))
    assert variable.dtype == tf.as_dtype(dtype) and not variable.trainable
    np.testing.assert_array_equal(variable.numpy(), value)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_variable_filled_from_a_file_reads_its_bytes_where_they_were_stored(
        dtype, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(weights, "_SLICE_BYTES", 1000)
    value = (np.arange(37 * 5 * 3) % 251).astype(dtype).reshape(37, 5, 3)
    file = tmp_path / "weights.bin"
    file.write_bytes(b"head" + value.tobytes() + b"tail")
    proto = tf.make_tensor_proto(np.zeros_like(value))  # only its dtype and shape are read
    variable = weights.as_variable(proto, weights.StoredBytes(file, 4))
    np.testing.assert_array_equal(variable.numpy(), value)

    file.write_bytes(b"head" + value.tobytes()[:-10])
    with pytest.raises(ValueError, match="truncated"):
        weights.as_variable(proto, weights.StoredBytes(file, 4))


def test_a_variable_of_a_repeated_value_is_made_whole() -> None:
    proto = tf.make_tensor_proto(np.float32(0.5), shape=[64, 32])
    assert not proto.tensor_content  # the proto keeps one value
    np.testing.assert_array_equal(weights.as_variable(proto).numpy(), np.full([64, 32], 0.5))


def test_a_tensor_of_a_weight_is_on_the_cpu_and_holds_the_value() -> None:
    value = np.random.default_rng(0).random([40, 30], np.float32)
    tensor = weights.as_tensor(tf.make_tensor_proto(value))
    assert tensor.device.endswith("CPU:0")
    np.testing.assert_array_equal(tensor.numpy(), value)
