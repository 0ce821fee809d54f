"""Loading models, and a clear one-line error for every way it can go wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from workbench.errors import ModelLoadError
from workbench.graph.loading import load_model


def test_saved_model_loads_with_signature_names(tiny_saved_model: Path) -> None:
    loaded = load_model(tiny_saved_model)
    assert loaded.kind == "saved_model"
    assert loaded.signature_key == "serving_default"
    assert loaded.input_names == ["x"]
    assert loaded.output_names == ["y"]
    out = loaded(x=np.ones([2, 4], np.float32))
    assert out["y"].shape == (2, 3)


def test_other_signature_key(tiny_saved_model: Path) -> None:
    assert load_model(tiny_saved_model, signature_key="other").signature_key == "other"


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="No such path: .*nowhere"):
        load_model(tmp_path / "nowhere")


def test_directory_that_is_not_a_saved_model(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="is not a SavedModel: it has no saved_model.pb"):
        load_model(tmp_path)


def test_corrupt_saved_model(tmp_path: Path, tiny_saved_model: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_saved_model, broken)
    (broken / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff garbage")
    with pytest.raises(ModelLoadError, match="saved_model.pb is corrupt"):
        load_model(broken)


def test_unknown_signature_key_lists_the_existing_ones(tiny_saved_model: Path) -> None:
    with pytest.raises(ModelLoadError) as info:
        load_model(tiny_saved_model, signature_key="predict")
    assert str(info.value) == (
        f"Signature key 'predict' not found in {tiny_saved_model}; it has: other, serving_default."
    )


def test_unknown_tags_list_the_available_sets(tiny_saved_model: Path) -> None:
    expected = "No MetaGraph with tags 'train'.*available tag sets: serve"
    with pytest.raises(ModelLoadError, match=expected):
        load_model(tiny_saved_model, tags=["train"])


def test_already_converted_model_is_refused(tmp_path: Path, tiny_saved_model: Path) -> None:
    from tensorflow.core.protobuf import saved_model_pb2

    converted = tmp_path / "converted"
    shutil.copytree(tiny_saved_model, converted)
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((converted / "saved_model.pb").read_bytes())
    proto.meta_graphs[0].graph_def.node.add(name="TRTEngineOp_000_000", op="TRTEngineOp")
    (converted / "saved_model.pb").write_bytes(proto.SerializeToString())
    with pytest.raises(ModelLoadError, match="already converted by TF-TRT"):
        load_model(converted)


def test_frozen_graph_def_with_outputs(tiny_frozen_pb: Path) -> None:
    loaded = load_model(tiny_frozen_pb, output_node_names=["y"])
    assert loaded.kind == "graph_def"
    assert loaded.input_names == ["x"]
    assert loaded(x=np.ones([3, 4], np.float32))["y"].shape == (3, 3)


def test_frozen_graph_def_needs_output_names(tiny_frozen_pb: Path) -> None:
    with pytest.raises(ModelLoadError, match="name its outputs with output_node_names"):
        load_model(tiny_frozen_pb)


def test_frozen_graph_def_unknown_output(tiny_frozen_pb: Path) -> None:
    with pytest.raises(ModelLoadError, match="has no node named logits"):
        load_model(tiny_frozen_pb, output_node_names=["logits"])


def test_corrupt_graph_def(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\xfe not a protobuf")
    with pytest.raises(ModelLoadError, match="is not a valid GraphDef"):
        load_model(bad, output_node_names=["y"])


def test_unknown_file_kind(tmp_path: Path) -> None:
    other = tmp_path / "model.onnx"
    other.write_bytes(b"x")
    with pytest.raises(ModelLoadError, match="file of unknown kind"):
        load_model(other)


def test_keras_model_object_and_file(tmp_path: Path) -> None:
    import keras

    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,), name="features")
    model = keras.Model(inputs, keras.layers.Dense(2, activation="relu")(inputs))
    loaded = load_model(model)
    assert loaded.kind == "keras"
    assert loaded.input_names == ["features"]
    expected = model(np.ones([1, 6], np.float32)).numpy()
    got = loaded(features=np.ones([1, 6], np.float32))["output_0"]
    np.testing.assert_allclose(got, expected, rtol=1e-6)

    path = tmp_path / "m.keras"
    model.save(path)
    assert load_model(path).kind == "keras"


def test_corrupt_keras_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ModelLoadError, match="Keras could not load"):
        load_model(bad)


def test_not_a_model_object() -> None:
    with pytest.raises(ModelLoadError, match="Cannot load a int"):
        load_model(42)
