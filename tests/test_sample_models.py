"""Sample models: names, CLI errors, the build cache, determinism, signatures and behaviour.

Cheap models are built into pytest's temporary directories; the expensive ones (and
digits_cnn, whose accuracy we check) come from the shared cache via the public `build()`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import sample_models
from sample_models import store

REPO = Path(__file__).resolve().parent.parent
CHEAP = ("quickstart_mlp", "tiny_bert", "detector")

# Signatures as DESIGN.md describes them: name -> (inputs, outputs), each {key: (dtype, shape)}.
IMAGENET = ({"images": ("float32", [None, 224, 224, 3])},
            {"predictions": ("float32", [None, 1000])})
SIGNATURES = {
    "quickstart_mlp": ({"images": ("float32", [None, 8, 8])},
                       {"logits": ("float32", [None, 10])}),
    "digits_cnn": ({"images": ("float32", [None, 8, 8, 1])},
                   {"logits": ("float32", [None, 10])}),
    "resnet50": IMAGENET,
    "mobilenet_v2": IMAGENET,
    "tiny_bert": ({"input_word_ids": ("int32", [None, None]),
                   "input_mask": ("int32", [None, None]),
                   "input_type_ids": ("int32", [None, None])},
                  {"pooled_output": ("float32", [None, 128]),
                   "sequence_output": ("float32", [None, None, 128])}),
    "detector": ({"images": ("uint8", [None, 64, 64, 3])},
                 {"boxes": ("float32", [None, 20, 4]), "scores": ("float32", [None, 20]),
                  "classes": ("float32", [None, 20]), "valid_detections": ("int32", [None])}),
}


# --- helpers -------------------------------------------------------------------------------


def _signature(model_dir: Path):
    import tensorflow as tf

    return tf.saved_model.load(str(model_dir)).signatures["serving_default"]


def _variables(model_dir: Path) -> dict[str, np.ndarray]:
    """Variable values from the SavedModel's checkpoint (the object-graph proto is skipped:
    it holds Keras' auto-generated names, which differ within one process)."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(model_dir / "variables" / "variables"))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
            if k != "_CHECKPOINTABLE_OBJECT_GRAPH"}


def _library_nodes(model_dir: Path) -> list:
    """Every NodeDef in the SavedModel's function library (where the model's ops live)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((model_dir / "saved_model.pb").read_bytes())
    library = proto.meta_graphs[0].graph_def.library
    return [node for fn in library.function for node in fn.node_def]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sample_models", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def cheap_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("samples")
    for name in CHEAP:
        assert sample_models.ensure_built(name, root).built
    return root


# --- names and errors ----------------------------------------------------------------------


def test_names_are_the_design_models_then_the_control_flow_ones():
    assert sample_models.NAMES == ("quickstart_mlp", "digits_cnn", "resnet50", "mobilenet_v2",
                                   "tiny_bert", "detector",
                                   "lstm", "gru", "map_fn_cnn", "png_cnn", "cond_mlp")


def test_unknown_name_raises_one_line_listing_valid_names(tmp_path):
    with pytest.raises(sample_models.UnknownSampleModelError) as info:
        sample_models.build("resnet51", tmp_path)
    message = str(info.value)
    assert "'resnet51'" in message and "\n" not in message
    assert all(name in message for name in sample_models.NAMES)
    assert isinstance(info.value, ValueError)
    assert not any(tmp_path.iterdir())


def test_keras_model_refuses_non_keras_sample():
    with pytest.raises(sample_models.UnknownSampleModelError, match="not Keras-based"):
        sample_models.keras_model("detector")


def test_cli_unknown_name_fails_before_building_anything(tmp_path):
    result = _cli("build", "--root", str(tmp_path), "quickstart_mlp", "nope")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown sample model 'nope'" in lines[0]
    assert "quickstart_mlp, digits_cnn, resnet50, mobilenet_v2, tiny_bert, detector" in lines[0]
    assert not (tmp_path / "quickstart_mlp").exists()


# --- build cache ---------------------------------------------------------------------------


def test_second_build_reuses_without_touching_files(cheap_root):
    model_dir = cheap_root / "quickstart_mlp"
    before = {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()}
    outcome = sample_models.ensure_built("quickstart_mlp", cheap_root)
    assert (outcome.path, outcome.built) == (model_dir, False)
    assert {p.name: p.stat().st_mtime_ns for p in model_dir.iterdir()} == before


def test_cli_reports_reuse_with_path_and_seconds(cheap_root):
    result = _cli("build", "--root", str(cheap_root), "detector", "tiny_bert")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert [line.split()[:2] for line in lines] == [["reused", "detector"],
                                                    ["reused", "tiny_bert"]]
    assert lines[0].split()[2] == str(cheap_root / "detector")
    assert lines[0].endswith("s")


def _fake_make(calls: list[Path]):
    def make(directory: Path) -> None:
        calls.append(directory)
        (directory / "payload.txt").write_text(f"build {len(calls)}")
    return make


def test_changed_recipe_version_rebuilds(tmp_path):
    calls: list[Path] = []
    first = store.ensure(tmp_path, "m", "v1", _fake_make(calls))
    again = store.ensure(tmp_path, "m", "v1", _fake_make(calls))
    bumped = store.ensure(tmp_path, "m", "v2", _fake_make(calls))
    assert (first.built, again.built, bumped.built) == (True, False, True)
    assert (tmp_path / "m" / "payload.txt").read_text() == "build 2"
    assert json.loads((tmp_path / "m" / store.MARKER).read_text())["version"] == "v2"


def test_half_built_directory_is_never_reused(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "saved_model.pb").write_bytes(b"truncated")  # no marker: interrupted
    calls: list[Path] = []
    assert store.ensure(tmp_path, "m", "v1", _fake_make(calls)).built
    assert not (tmp_path / "m" / "saved_model.pb").exists()
    assert (tmp_path / "m" / "payload.txt").exists()


def test_concurrent_builders_build_once(tmp_path):
    calls: list[Path] = []
    slow_make = _fake_make(calls)

    def make(directory: Path) -> None:
        time.sleep(0.2)  # long enough for the other thread to arrive while we build
        slow_make(directory)

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(lambda _: store.ensure(tmp_path, "m", "v1", make), range(2)))
    assert sorted(o.built for o in outcomes) == [False, True]
    assert len(calls) == 1


def test_failed_build_leaves_no_directory_behind(tmp_path):
    def broken(directory: Path) -> None:
        (directory / "saved_model.pb").write_bytes(b"partial")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        store.ensure(tmp_path, "m", "v1", broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".m.lock"]


def test_rebuild_of_real_model_after_marker_change(tmp_path):
    first = sample_models.ensure_built("detector", tmp_path)
    marker = first.path / store.MARKER
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "version": "v0"}))
    second = sample_models.ensure_built("detector", tmp_path)
    assert second.built and sample_models.ensure_built("detector", tmp_path).built is False


# --- determinism ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", CHEAP)
def test_two_builds_give_identical_variables(name, cheap_root, tmp_path):
    first = _variables(cheap_root / name)
    second = _variables(sample_models.build(name, tmp_path))
    assert first.keys() == second.keys() and first
    for key, value in first.items():
        np.testing.assert_array_equal(value, second[key], err_msg=f"{name}: {key}")


@pytest.mark.slow
def test_mobilenet_build_matches_the_cached_build(tmp_path):
    cached = _variables(sample_models.build("mobilenet_v2"))
    fresh = _variables(sample_models.build("mobilenet_v2", tmp_path))
    assert cached.keys() == fresh.keys()
    assert all(np.array_equal(cached[k], fresh[k]) for k in cached)


# --- signatures ----------------------------------------------------------------------------


def _check_signature(model_dir: Path, name: str) -> None:
    inputs, outputs = SIGNATURES[name]
    fn = _signature(model_dir)
    got_in = {k: (s.dtype.name, s.shape.as_list()) for k, s in
              fn.structured_input_signature[1].items()}
    got_out = {k: (s.dtype.name, s.shape.as_list()) for k, s in fn.structured_outputs.items()}
    assert (got_in, got_out) == (inputs, outputs)
    assert fn.structured_input_signature[0] == ()  # keyword-only, like TF-Hub/Keras exports
    def concrete(shape: list) -> list[int]:  # batch 2, other free dims 5
        return [2] + [5 if d is None else d for d in shape[1:]]

    result = fn(**{k: np.zeros(concrete(shape), dtype) for k, (dtype, shape) in inputs.items()})
    got = {k: (v.dtype.name, v.shape.as_list()) for k, v in result.items()}
    assert got == {k: (dtype, concrete(shape)) for k, (dtype, shape) in outputs.items()}


@pytest.mark.parametrize("name", CHEAP)
def test_cheap_signature_matches_design(name, cheap_root):
    _check_signature(cheap_root / name, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["digits_cnn", "resnet50", "mobilenet_v2"])
def test_cached_signature_matches_design(name):
    _check_signature(sample_models.build(name), name)


# --- behaviour -----------------------------------------------------------------------------


@pytest.mark.slow
def test_digits_cnn_accuracy_and_keras_model_agree():
    data = sample_models.data("digits_cnn")
    assert data["x_test"].shape[1:] == (8, 8, 1) and data["x_calib"].shape == (128, 8, 8, 1)
    assert len(data["x_test"]) == len(data["y_test"]) == 360
    logits = _signature(sample_models.build("digits_cnn"))(images=data["x_test"])["logits"]
    assert (np.argmax(logits, 1) == data["y_test"]).mean() > 0.95
    keras_logits = sample_models.keras_model("digits_cnn")(data["x_test"], training=False)
    np.testing.assert_allclose(keras_logits, logits, atol=1e-4)


def test_quickstart_mlp_learned_the_digits(cheap_root):
    data = sample_models.data("quickstart_mlp", cheap_root)
    logits = _signature(cheap_root / "quickstart_mlp")(images=data["x_test"])["logits"]
    assert (np.argmax(logits, 1) == data["y_test"]).mean() > 0.85
    # Dropout is inactive in the export: the same input gives the same logits.
    again = _signature(cheap_root / "quickstart_mlp")(images=data["x_test"])["logits"]
    np.testing.assert_array_equal(logits, again)


def test_quickstart_mlp_mirrors_the_user_guide_architecture(cheap_root):
    model = sample_models.keras_model("quickstart_mlp", cheap_root)
    layers = [(type(layer).__name__, getattr(layer, "units", None)) for layer in model.layers]
    assert layers == [("Flatten", None), ("Dense", 128), ("Dropout", None), ("Dense", 10)]


def test_tiny_bert_dynamic_shapes_vocabulary_and_padding_mask(cheap_root):
    import tensorflow as tf

    fn = _signature(cheap_root / "tiny_bert")
    shapes = [v.shape for v in _variables(cheap_root / "tiny_bert").values()]
    assert shapes.count((30522, 128)) == 1 and shapes.count((2, 128)) == 1  # word, type tables
    rng = np.random.default_rng(0)
    for batch, seq in [(1, 3), (3, 512)]:
        ids = rng.integers(0, 30522, (batch, seq), dtype=np.int32)
        out = fn(input_word_ids=ids, input_mask=np.ones_like(ids), input_type_ids=0 * ids)
        assert out["pooled_output"].shape == (batch, 128)
        assert out["sequence_output"].shape == (batch, seq, 128)
    beyond = [([[30522]], r"not in \[0, 30522\)"),
              (np.zeros([1, 513]), r"Incompatible shapes: \[1,512,128\] vs. \[1,513,128\]")]
    for ids, error in beyond:  # the vocabulary and the position table end where BERT's do
        ids = np.asarray(ids, np.int32)
        with pytest.raises(tf.errors.InvalidArgumentError, match=error):
            fn(input_word_ids=ids, input_mask=np.ones_like(ids), input_type_ids=0 * ids)
    # Tokens behind input_mask == 0 must not influence the real tokens, as in BERT.
    ids = np.array([[101, 2023, 2003, 102, 0, 0]], dtype=np.int32)
    mask = np.array([[1, 1, 1, 1, 0, 0]], dtype=np.int32)
    noisy = ids.copy()
    noisy[0, 4:] = [30521, 7]
    clean = fn(input_word_ids=ids, input_mask=mask, input_type_ids=0 * ids)
    padded = fn(input_word_ids=noisy, input_mask=mask, input_type_ids=0 * ids)
    np.testing.assert_allclose(clean["sequence_output"][:, :4], padded["sequence_output"][:, :4],
                               atol=1e-5)
    np.testing.assert_allclose(clean["pooled_output"], padded["pooled_output"], atol=1e-5)


def test_detector_graph_has_the_ops_tftrt_rejects(cheap_root):
    nodes = _library_nodes(cheap_root / "detector")
    ops = {node.op for node in nodes}
    assert {"Conv2D", "CombinedNonMaxSuppression", "ResizeBilinear"} <= ops
    (resize,) = [n for n in nodes if n.op == "ResizeBilinear"]
    assert resize.attr["align_corners"].b is False
    casts = [n for n in nodes if n.op == "Cast"]
    assert [(c.attr["SrcT"].type, c.attr["DstT"].type) for c in casts] == [(4, 1)]  # uint8->f32


def test_detector_outputs_are_valid_detections(cheap_root):
    images = np.random.default_rng(0).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    out = _signature(cheap_root / "detector")(images=images)
    valid = out["valid_detections"].numpy()
    assert ((valid >= 0) & (valid <= 20)).all()
    boxes = out["boxes"].numpy()
    assert ((boxes >= 0) & (boxes <= 1)).all()  # clip_boxes=True
    assert (boxes[..., 2] >= boxes[..., 0]).all() and (boxes[..., 3] >= boxes[..., 1]).all()
    assert set(np.unique(out["classes"].numpy())) <= {0.0, 1.0, 2.0}


# --- trained-looking weights ---------------------------------------------------------------


def test_untrained_models_get_trained_looking_biases():
    """`weights=None`/fresh layers leave every bias at 0, which Grappler folds away (a BiasAdd
    of zeros becomes an Identity); the untrained recipes give them small seeded values."""
    from sample_models import detector

    net = detector.model()
    biases = [np.asarray(v) for v in net.variables if v.path.endswith("/bias")]
    assert len(biases) == 7 and all(np.abs(b).max() > 0 for b in biases)
    again = [np.asarray(v) for v in detector.model().variables if v.path.endswith("/bias")]
    assert all(np.array_equal(a, b) for a, b in zip(biases, again, strict=True))
